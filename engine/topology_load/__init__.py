"""Topology readers: DOT (NVIDIA Air / topology_converter), containerlab YAML, the
engine's own JSON/YAML form and `lldpctl -f json` neighbours, each turned into a plain
`TopologySpec` (one module per format).

This package knows file formats only; `engine.topology` builds the graph from the spec.
Keeping the readers free of the graph avoids an import cycle and lets every reader be
tested on text alone. Errors are `TopologyError`s whose message starts with the place
in the file (`fabric.dot, line 12: ...`, `clab.yaml: links[3]: ...`); what a reader
guessed or left out is in the spec's `warnings`.

Roles: one of superspine, spine, leaf, host, storage. Aliases: server -> host;
tor, exit, border -> leaf. A device without a role gets one from its name (see
`role_from_name`).
"""
from __future__ import annotations

import re
from pathlib import Path

import yaml

from engine.jsonstream import JSONStreamError, documents
from engine.topology_load.clab import parse_clab
from engine.topology_load.common import (
    ROLE_ALIASES,
    ROLES,
    SWITCH_ROLES,
    TopologyError,
    TopologySpec,
    canonical_role,
    role_from_name,
)
from engine.topology_load.dot import parse_dot
from engine.topology_load.lldp import is_lldp_document, lldp_spec, read_lldp
from engine.topology_load.own import parse_own

__all__ = [
    "ROLES", "ROLE_ALIASES", "SWITCH_ROLES", "TopologyError", "TopologySpec", "canonical_role", "parse_clab",
    "parse_dot", "parse_own", "read_lldp", "read_spec", "role_from_name",
]


def read_spec(path: str | Path) -> TopologySpec:
    """Read any supported topology file (or a folder of lldpctl files), choosing the
    format by suffix and content."""
    p = Path(path)
    source = str(p)
    if p.is_dir():
        return read_lldp(p)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TopologyError(f"{source}: no such topology file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TopologyError(f"{source}: cannot read topology file: {exc}") from None
    suffix = p.suffix.lower()
    if suffix in (".dot", ".gv") or (suffix not in (".json", ".yaml", ".yml") and _looks_like_dot(text)):
        return parse_dot(text, source=source)
    doc = _parse_document(text, source=source, suffix=suffix, device=p.stem)
    if isinstance(doc, TopologySpec):
        return doc
    if isinstance(doc, dict) and "topology" in doc:
        return parse_clab(doc, source=source)
    if isinstance(doc, dict) and ("devices" in doc or "links" in doc):
        return parse_own(doc, source=source)
    raise TopologyError(
        f"{source}: not a topology: expected a DOT graph, a containerlab file "
        "(top-level 'topology:'), the engine's form ('devices' and 'links') or lldpctl -f json output"
    )


_DOT_START = re.compile(r"\A\s*(?:(?://|#)[^\n]*\n\s*|/\*.*?\*/\s*)*(?:strict\s+)?(?:di)?graph\b", re.I | re.S)


def _looks_like_dot(text: str) -> bool:
    return bool(_DOT_START.match(text))


def _parse_document(text: str, *, source: str, suffix: str, device: str) -> object:
    """The file's one document, or the spec of its lldpctl documents."""
    if suffix == ".json" or (suffix not in (".yaml", ".yml") and text.lstrip()[:1] in ("{", "[")):
        try:
            docs = list(documents(text))
        except JSONStreamError as exc:
            raise TopologyError(f"{source}, line {exc.line}: {exc.message}") from None
        if docs and is_lldp_document(docs[0][0]):
            return lldp_spec(docs, source=source, device=device)
        if len(docs) != 1:
            raise TopologyError(f"{source}: {len(docs)} JSON documents; only lldpctl output may hold several")
        return docs[0][0]
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}, line {mark.line + 1}" if mark is not None else source
        problem = getattr(exc, "problem", None) or str(exc)
        context, start = getattr(exc, "context", None), getattr(exc, "context_mark", None)
        if context and start is not None:
            problem += f" ({context} on line {start.line + 1})"
        raise TopologyError(f"{where}: bad YAML: {problem}") from None

