"""Prometheus exposition as {sample: value}, read by prometheus-client's own parser."""
from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def sample_key(name: str, labels: dict[str, str]) -> str:
    """`name` or `name{a="x",b="y"}`, labels in the exposition's order."""
    if not labels:
        return name
    return name + "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


def samples(text: str) -> dict[str, float]:
    """Every sample of an exposition by its name and labels: a malformed one raises."""
    return {sample_key(s.name, s.labels): float(s.value)
            for family in text_string_to_metric_families(text) for s in family.samples}


def scrape(base: str, client=None) -> dict[str, float]:
    """The samples of `base`/metrics (an httpx client, or a one-off request)."""
    import httpx

    response = (client or httpx).get(base + "/metrics", timeout=5)
    response.raise_for_status()
    return samples(response.text)
