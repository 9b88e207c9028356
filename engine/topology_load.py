"""Topology file readers: DOT (NVIDIA Air / topology_converter), containerlab YAML and
the engine's own JSON/YAML form, each turned into a plain `TopologySpec`.

This module knows file formats only; `engine.topology` builds the graph from the spec.
Keeping the readers free of the graph avoids an import cycle and lets every reader be
tested on text alone. Errors are `TopologyError`s whose message starts with the place
in the file (`fabric.dot, line 12: ...`, `clab.yaml: links[3]: ...`).

Roles: one of superspine, spine, leaf, host, storage. Aliases: server -> host;
tor, exit, border -> leaf. A device without a role gets one from its name (see
`role_from_name`). The out-of-band management network of Air files (functions
oob-switch and oob-server) is not part of the data fabric: those devices and every
link touching them are dropped, otherwise the management switch would look like a
two-hop shortcut between every pair of devices.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

ROLES = ("superspine", "spine", "leaf", "host", "storage")
SWITCH_ROLES = frozenset({"superspine", "spine", "leaf"})
ROLE_ALIASES = {"server": "host", "tor": "leaf", "exit": "leaf", "border": "leaf"}
MANAGEMENT_FUNCTIONS = frozenset({"oob-switch", "oob-server"})
NAMED_BY_NAME = frozenset({"fake"})  # topology_converter placeholder devices
CLAB_SPECIAL_NODES = frozenset({"host", "mgmt-net", "macvlan", "bridge", "ovs-bridge"})
CLAB_SINGLE_ENDED = frozenset({"host", "mgmt-net", "macvlan", "dummy", "vxlan", "vxlan-stitch"})
_EXPECTED = f"expected one of {', '.join(ROLES)}"


class TopologyError(ValueError):
    """A topology that cannot be read; the message names the file, line or item."""


@dataclass(frozen=True, slots=True)
class TopologySpec:
    """Devices with roles and links as interface-id pairs, plus where each link came
    from (so a later check can point at the offending line)."""

    roles: dict[str, str]
    links: list[tuple[str, str]]
    where: list[str]


def canonical_role(value: object) -> str | None:
    """The engine's role for a role/function/group value, None if not one we know."""
    if not isinstance(value, str):
        return None
    role = value.strip().lower()
    role = ROLE_ALIASES.get(role, role)
    return role if role in ROLES else None


def role_from_name(name: str) -> str:
    """Role guessed from a device name, for devices no file gives a role:
    superspine*/super-spine* -> superspine, spine* -> spine, leaf*/tor*/exit*/border*
    -> leaf, stor* -> storage, anything else -> host."""
    low = name.lower()
    if low.startswith(("superspine", "super-spine")):
        return "superspine"
    if low.startswith("spine"):
        return "spine"
    if low.startswith(("leaf", "tor", "exit", "border")):
        return "leaf"
    if low.startswith("stor"):
        return "storage"
    return "host"


# --------------------------------------------------------------------------- files


def read_spec(path: str | Path) -> TopologySpec:
    """Read any supported topology file, choosing the format by suffix and content."""
    p = Path(path)
    source = str(p)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TopologyError(f"{source}: no such topology file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TopologyError(f"{source}: cannot read topology file: {exc}") from None
    suffix = p.suffix.lower()
    if suffix in (".dot", ".gv") or (suffix not in (".json", ".yaml", ".yml") and _looks_like_dot(text)):
        return parse_dot(text, source=source)
    doc = _parse_document(text, source=source, suffix=suffix)
    if isinstance(doc, dict) and "topology" in doc:
        return parse_clab(doc, source=source)
    if isinstance(doc, dict) and ("devices" in doc or "links" in doc):
        return parse_own(doc, source=source)
    raise TopologyError(
        f"{source}: not a topology: expected a DOT graph, a containerlab file "
        "(top-level 'topology:') or the engine's form ('devices' and 'links')"
    )


_DOT_START = re.compile(r"\A\s*(?:(?://|#)[^\n]*\n\s*|/\*.*?\*/\s*)*(?:strict\s+)?(?:di)?graph\b", re.I | re.S)


def _looks_like_dot(text: str) -> bool:
    return bool(_DOT_START.match(text))


def _parse_document(text: str, *, source: str, suffix: str) -> object:
    if suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise TopologyError(f"{source}, line {exc.lineno}: bad JSON: {exc.msg}") from None
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


# ------------------------------------------------------------------ engine's own form


def parse_own(doc: dict, *, source: str) -> TopologySpec:
    """`{"devices": [{"id", "role"}], "links": [{"id"?, "a", "b"}]}` (see Topology.to_dict)."""
    devices = doc.get("devices") or []
    links = doc.get("links") or []
    if not isinstance(devices, list) or not isinstance(links, list):
        raise TopologyError(f"{source}: 'devices' and 'links' must be lists")
    roles: dict[str, str] = {}
    for i, dev in enumerate(devices):
        if not isinstance(dev, dict) or not isinstance(dev.get("id"), str) or not dev["id"]:
            raise TopologyError(f"{source}: devices[{i}]: needs a string 'id'")
        role = canonical_role(dev.get("role"))
        if role is None:
            raise TopologyError(f"{source}: devices[{i}] ({dev['id']}): unknown role {dev.get('role')!r}")
        roles[dev["id"]] = role
    pairs: list[tuple[str, str]] = []
    where: list[str] = []
    for i, link in enumerate(links):
        a, b = _own_link(link, label=f"{source}: links[{i}]")
        pairs.append((a, b))
        where.append(f"{source}: links[{i}]")
    return TopologySpec(roles=roles, links=pairs, where=where)


def _own_link(link: object, *, label: str) -> tuple[str, str]:
    if not isinstance(link, dict) or not isinstance(link.get("a"), str) or not isinstance(link.get("b"), str):
        raise TopologyError(f"{label}: needs string interface ids 'a' and 'b'")
    a, b = link["a"], link["b"]
    expected = "--".join(sorted((a, b)))
    if link.get("id") is not None and link["id"] != expected:
        raise TopologyError(f"{label}: id {link['id']!r} does not match its ends (expected {expected!r})")
    return a, b


# -------------------------------------------------------------------- containerlab


def parse_clab(doc: dict, *, source: str) -> TopologySpec:
    """containerlab: `topology.nodes.<name>` and `topology.links[].endpoints`."""
    topo = doc.get("topology")
    if not isinstance(topo, dict):
        raise TopologyError(f"{source}: 'topology' must be a mapping")
    nodes = topo.get("nodes") or {}
    if not isinstance(nodes, dict):
        raise TopologyError(f"{source}: topology.nodes must be a mapping of node names")
    roles = {str(name): _clab_role(str(name), node or {}, topo=topo, source=source) for name, node in nodes.items()}
    links = topo.get("links") or []
    if not isinstance(links, list):
        raise TopologyError(f"{source}: topology.links must be a list")
    pairs: list[tuple[str, str]] = []
    where: list[str] = []
    for i, link in enumerate(links):
        label = f"{source}: links[{i}]"
        pair = _clab_link(link, roles=roles, label=label)
        if pair is not None:
            pairs.append(pair)
            where.append(label)
    return TopologySpec(roles=roles, links=pairs, where=where)


def _clab_role(name: str, node: object, *, topo: dict, source: str) -> str:
    """Role from labels (inherited defaults -> kinds -> groups -> node), then group."""
    if not isinstance(node, dict):
        raise TopologyError(f"{source}: node {name}: must be a mapping")
    group = node.get("group")
    labels: dict = {}
    for layer in (
        topo.get("defaults"),
        (topo.get("kinds") or {}).get(node.get("kind")),
        (topo.get("groups") or {}).get(group),
        node,
    ):
        if isinstance(layer, dict) and isinstance(layer.get("labels"), dict):
            labels.update(layer["labels"])
    raw = labels.get("role", labels.get("graph-role"))
    if raw is not None:
        role = canonical_role(raw)
        if role is None:
            raise TopologyError(f"{source}: node {name}: unknown role label {raw!r} ({_EXPECTED})")
        return role
    # `group` is free-form in containerlab ("tier-1", "rack3"): use it only if it names a role.
    return canonical_role(group) or role_from_name(name)


def _clab_link(link: object, *, roles: dict[str, str], label: str) -> tuple[str, str] | None:
    if not isinstance(link, dict):
        raise TopologyError(f"{label}: must be a mapping with 'endpoints'")
    if link.get("type") in CLAB_SINGLE_ENDED:
        return None  # a link to the container host or a bridge, not a fabric cable
    endpoints = link.get("endpoints")
    if not isinstance(endpoints, list) or len(endpoints) != 2:
        raise TopologyError(f"{label}: 'endpoints' must list exactly two 'node:interface' ends")
    ends = [_clab_endpoint(ep, label=label) for ep in endpoints]
    for node, _ in ends:
        if node not in roles:
            if node in CLAB_SPECIAL_NODES:
                return None
            raise TopologyError(f"{label}: endpoint node {node!r} is not in topology.nodes")
    return f"{ends[0][0]}:{ends[0][1]}", f"{ends[1][0]}:{ends[1][1]}"


def _clab_endpoint(ep: object, *, label: str) -> tuple[str, str]:
    if isinstance(ep, dict):
        node, iface = ep.get("node"), ep.get("interface")
    elif isinstance(ep, str) and ":" in ep:
        node, iface = ep.split(":", 1)
    else:
        raise TopologyError(f"{label}: endpoint {ep!r} is not 'node:interface'")
    if not isinstance(node, str) or not isinstance(iface, str) or not node.strip() or not iface.strip():
        raise TopologyError(f"{label}: endpoint {ep!r} needs a node and an interface")
    return node.strip(), iface.strip()


# ----------------------------------------------------------------------------- DOT


def parse_dot(text: str, *, source: str) -> TopologySpec:
    """NVIDIA Air / topology_converter DOT: node statements carry `function` (or
    `role`), edge statements join `"dev":"port"` ends."""
    nodes, edges = _DotParser(_dot_tokens(text, source=source), source=source).parse()
    roles: dict[str, str] = {}
    dropped: set[str] = set()
    for name, (attrs, line) in nodes.items():
        raw = attrs.get("role", attrs.get("function"))
        if raw is None or raw.strip().lower() in NAMED_BY_NAME:
            roles[name] = role_from_name(name)
        elif raw.strip().lower() in MANAGEMENT_FUNCTIONS:
            dropped.add(name)
        elif (role := canonical_role(raw)) is not None:
            roles[name] = role
        else:
            raise TopologyError(f"{source}, line {line}: device {name}: unknown function {raw!r} ({_EXPECTED})")
    pairs: list[tuple[str, str]] = []
    where: list[str] = []
    for (dev_a, port_a), (dev_b, port_b), line in edges:
        if dev_a in dropped or dev_b in dropped:
            continue
        for dev in (dev_a, dev_b):
            roles.setdefault(dev, role_from_name(dev))  # a device seen only in edges
        pairs.append((f"{dev_a}:{port_a}", f"{dev_b}:{port_b}"))
        where.append(f"{source}, line {line}")
    return TopologySpec(roles=roles, links=pairs, where=where)


_DOT_TOKEN = re.compile(
    r"""(?P<space>[ \t\r\f\v]+)
      | (?P<newline>\n)
      | (?P<comment>(?://|\#)[^\n]*)
      | (?P<block>/\*)
      | (?P<quote>")
      | (?P<edge>--|->)
      | (?P<bare>[\w.]+(?:-[\w.]+)*)
      | (?P<sym>[{}\[\]=;,:])""",
    re.X,
)
_DOT_KEYWORDS = frozenset({"strict", "graph", "digraph", "node", "edge", "subgraph"})

_Token = tuple[str, str, int]  # kind ("id", "kw", "edge" or the symbol itself), text, line


def _dot_tokens(text: str, *, source: str) -> list[_Token]:
    """Split DOT text into tokens with their line numbers; quoted ids keep their text."""
    tokens: list[_Token] = []
    pos, line = 0, 1
    while pos < len(text):
        m = _DOT_TOKEN.match(text, pos)
        if m is None:
            raise TopologyError(f"{source}, line {line}: unexpected character {text[pos]!r}")
        kind = m.lastgroup
        if kind == "quote":
            value, pos, end_line = _dot_quoted(text, m.end(), line=line, source=source)
            tokens.append(("id", value, line))
            line = end_line
            continue
        if kind == "block":
            close = text.find("*/", m.end())
            if close < 0:
                raise TopologyError(f"{source}, line {line}: unterminated /* comment")
            line += text.count("\n", pos, close)
            pos = close + 2
            continue
        if kind == "newline":
            line += 1
        elif kind == "bare":
            word = m.group()
            tokens.append(("kw" if word.lower() in _DOT_KEYWORDS else "id", word, line))
        elif kind == "edge":
            tokens.append(("edge", m.group(), line))
        elif kind == "sym":
            tokens.append((m.group(), m.group(), line))
        pos = m.end()
    return tokens


def _dot_quoted(text: str, start: int, *, line: int, source: str) -> tuple[str, int, int]:
    """A quoted id from `start` (just past the quote): its value, the next position and
    the line it ends on. `\\"` is a quote; backslash-newline continues the string."""
    out: list[str] = []
    pos, end_line = start, line
    while pos < len(text):
        ch = text[pos]
        if ch == '"':
            return "".join(out), pos + 1, end_line
        if ch == "\\" and pos + 1 < len(text) and text[pos + 1] in '"\n':
            if text[pos + 1] == '"':
                out.append('"')
            else:
                end_line += 1
            pos += 2
            continue
        if ch == "\n":
            end_line += 1
        out.append(ch)
        pos += 1
    raise TopologyError(f"{source}, line {line}: unterminated quoted string")


_Endpoint = tuple[str, str | None, int]  # device, port, line


class _DotParser:
    """Recursive-descent reader of the DOT subset topology files use. Subgraphs are
    flattened; graph, node and edge default attributes are read and ignored."""

    def __init__(self, tokens: list[_Token], *, source: str) -> None:
        self.tokens = tokens
        self.pos = 0
        self.source = source
        self.nodes: dict[str, tuple[dict[str, str], int]] = {}
        self.edges: list[tuple[tuple[str, str], tuple[str, str], int]] = []

    def parse(self) -> tuple[dict[str, tuple[dict[str, str], int]], list]:
        self._header()
        depth = 1
        while depth:
            kind, value, line = self._next("a closing '}'")
            if kind == "}":
                depth -= 1
            elif kind == "{":
                depth += 1
            elif kind == "kw" and value.lower() == "subgraph":
                if self._peek_kind() == "id":
                    self.pos += 1
                self._expect("{", what="'{' after subgraph")
                depth += 1
            elif kind == "kw" and value.lower() in ("graph", "node", "edge"):
                self._attr_lists()
            elif kind == "id" and self._peek_kind() == "=":
                self.pos += 1
                self._expect("id", what=f"a value for graph attribute {value!r}")
            elif kind == "id":
                self._statement((kind, value, line))
            elif kind not in (";", ","):
                raise self._error(line, f"unexpected {value!r}")
        if self.pos < len(self.tokens):
            raise self._error(self.tokens[self.pos][2], "text after the graph's closing '}'")
        return self.nodes, self.edges

    def _header(self) -> None:
        kind, value, line = self._next("'graph' or 'digraph'")
        if kind == "kw" and value.lower() == "strict":
            kind, value, line = self._next("'graph' or 'digraph'")
        if kind != "kw" or value.lower() not in ("graph", "digraph"):
            raise self._error(line, f"expected 'graph' or 'digraph', found {value!r}")
        if self._peek_kind() == "id":
            self.pos += 1
        self._expect("{", what="'{' to open the graph")

    def _statement(self, first: _Token) -> None:
        ends = [self._endpoint(first)]
        while self._peek_kind() == "edge":
            self.pos += 1
            if self._peek_kind() not in ("id", "kw"):  # blame the edge, not the next line
                raise self._error(first[2], "edge operator without a node after it")
            ends.append(self._endpoint(self._next("a node")))
        attrs = self._attr_lists()
        line = first[2]
        if len(ends) == 1:
            name, port, _ = ends[0]
            if port is not None:
                raise self._error(line, f"node statement {name}:{port} has a port; ports belong on edges")
            old = self.nodes.get(name, ({}, line))[0]
            self.nodes[name] = ({**old, **attrs}, line)
            return
        if len(ends) > 2:
            raise self._error(line, "one link per edge statement, found a chain of edges")
        for name, port, _ in ends:
            if port is None:
                raise self._error(line, f'edge without port: {name!r} needs one, as in "{name}":"swp1"')
        (a, pa, _), (b, pb, _) = ends
        self.edges.append(((a, pa), (b, pb), line))

    def _endpoint(self, tok: _Token) -> _Endpoint:
        name, port = tok[1], None
        if self._peek_kind() == ":":
            self.pos += 1
            port = self._expect("id", what=f"a port name after {name!r}:")[1]
            if self._peek_kind() == ":":  # compass point, e.g. "leaf01":"swp1":n
                self.pos += 1
                self._expect("id", what="a compass point")
        return name, port, tok[2]

    def _attr_lists(self) -> dict[str, str]:
        attrs: dict[str, str] = {}
        while self._peek_kind() == "[":
            opened = self.tokens[self.pos][2]
            self.pos += 1
            while True:
                kind, key, line = self._next(f"']' (attribute list opened on line {opened} is not closed)")
                if kind == "]":
                    break
                if kind in (",", ";"):
                    continue
                if kind not in ("id", "kw"):
                    raise self._error(line, f"bad attribute: unexpected {key!r}")
                if self._peek_kind() != "=":
                    raise self._error(
                        line, f"bad attribute {key!r}: expected '=' and a value (attribute list opened on line {opened})"
                    )
                self.pos += 1
                attrs[key.lower()] = self._expect("id", what=f"a value for attribute {key!r}")[1]
        return attrs

    def _peek_kind(self) -> str | None:
        return self.tokens[self.pos][0] if self.pos < len(self.tokens) else None

    def _next(self, wanted: str) -> _Token:
        if self.pos >= len(self.tokens):
            last = self.tokens[-1][2] if self.tokens else 1
            raise self._error(last, f"unexpected end of file, expected {wanted}")
        tok = self.tokens[self.pos]
        self.pos += 1
        return tok

    def _expect(self, kind: str, *, what: str) -> _Token:
        tok = self._next(what)
        if tok[0] != kind and not (kind == "id" and tok[0] == "kw"):
            raise self._error(tok[2], f"expected {what}, found {tok[1]!r}")
        return tok

    def _error(self, line: int, message: str) -> TopologyError:
        return TopologyError(f"{self.source}, line {line}: {message}")
