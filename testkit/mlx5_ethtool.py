"""An mlx5 NIC's `ethtool -S` counters as Telegraf's inputs.ethtool writes them, for
Telegraf's inputs.exec to run each interval (line protocol on stdout, no timestamp:
Telegraf stamps the gather). The counter names are the mlx5 driver's own (the real
sample's list, ../shared/real-samples/ethtool/mlx5_ethtool_S_counter_names_kernel_doc.txt,
[p] as priorities 0..7); the values advance with the time since the first call (kept in
`--state`), and after `--fault-after` seconds the fault is injected:

- `pfc_storm`: the NIC sends PFC pause frames on priority 3 nonstop (tx_prio3_pause and
  its duration climb, tx_pause_storm_warning_events counts up), as a stuck receiver does;
- `link_down`: the link drops (link 0, link_down_events_phy counts once, traffic stops);
- `link_flap`: the link goes down and up again and again (a bad cable or optic): down for
  2 s of every 4, link_down_events_phy counting each drop.

    python testkit/mlx5_ethtool.py --names FILE --state FILE --host gpu001 --interface eth0 \\
        --fault pfc_storm --fault-after 20
"""
from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

RATES = {"rx_bytes": 2_000_000_000, "tx_bytes": 2_000_000_000, "rx_packets": 500_000, "tx_packets": 500_000,
         "rx_bytes_phy": 2_000_000_000, "tx_bytes_phy": 2_000_000_000, "rx_packets_phy": 500_000,
         "tx_packets_phy": 500_000, "rx_bits_phy": 16_000_000_000}
FLAP_S = 4.0  # a flapping link's period
STORM = {"tx_prio3_pause": 20_000, "tx_prio3_pause_duration": 900_000, "tx_pause_storm_warning_events": 1}


def as_ethtool(name: str, tags: dict, fields: dict) -> tuple[str, dict, dict]:
    """A contract record as the benchmarks and shard tests send a NIC through the shipped
    mapping `telegraf_ethtool_mlx5`: a nic_port record named `ethtool`, tagged
    driver=mlx5_core, its `link` 1/0 as Telegraf's inputs.ethtool writes it; any other
    record as it is."""
    if name != "nic_port":
        return name, tags, fields
    return "ethtool", {"driver": "mlx5_core", **tags}, {
        k: ({"up": 1, "down": 0}.get(v, v) if k == "link" else v) for k, v in fields.items()}


def counter_names(path: Path) -> list[str]:
    """The file's counter names, [p] expanded to 0..7; ring [i] and lane [l] ones left out."""
    names: list[str] = []
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            continue
        for name in line.split():
            if "[p]" in name:
                names += [name.replace("[p]", str(p)) for p in range(8)]
            elif not re.search(r"\[[il]\]", name):
                names.append(name)
    return list(dict.fromkeys(names))


def line(names: list[str], t: float, *, host: str, interface: str, fault: str, fault_after: float) -> str:
    faulty = fault != "none" and t >= fault_after
    healthy_t = 3600 + (min(t, fault_after) if fault == "link_down" else t)  # (up an hour; a dead link: no traffic)
    fields = {n: int(RATES.get(n, 0) * healthy_t) for n in names}
    if faulty and fault == "pfc_storm":
        for n, rate in STORM.items():
            fields[n] = int(rate * (t - fault_after)) + (1 if n == "tx_pause_storm_warning_events" else 0)
    fields["link_down_events_phy"] = 1 if faulty and fault == "link_down" else 0
    link = 0 if faulty and fault == "link_down" else 1
    if faulty and fault == "link_flap":
        fields["link_down_events_phy"] = int((t - fault_after) // FLAP_S) + 1
        link = 0 if (t - fault_after) % FLAP_S < FLAP_S / 2 else 1
    body = ",".join(f"{k}={v}i" for k, v in fields.items())
    return f"ethtool,driver=mlx5_core,host={host},interface={interface} {body},link={link}i"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--names", type=Path, required=True)
    p.add_argument("--state", type=Path, required=True, help="file holding the first call's time")
    p.add_argument("--host", required=True)
    p.add_argument("--interface", required=True)
    p.add_argument("--fault", choices=("none", "pfc_storm", "link_down", "link_flap"), default="none")
    p.add_argument("--fault-after", type=float, default=20.0)
    a = p.parse_args(argv)
    now = time.time()
    if not a.state.exists():
        a.state.write_text(repr(now))
    t = now - float(a.state.read_text())
    print(line(counter_names(a.names), t, host=a.host, interface=a.interface, fault=a.fault,
               fault_after=a.fault_after))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
