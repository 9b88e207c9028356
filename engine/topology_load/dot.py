"""NVIDIA Air / topology_converter DOT: node statements carry `function` (or `role`),
edge statements join `"dev":"port"` ends. Read with a small tokenizer and parser of
our own (see docs/design.md for why not pydot).

Air files also describe what is not the data fabric: the out-of-band management
network (functions oob-switch, oob-server, ...), the uplink to the outside
(`internet`) and placeholders for uncabled ports (`fake`, Air's "air-internal"). Those
devices and every link touching them are left out, with a warning naming them:
otherwise the management switch would look like a two-hop shortcut between every pair
of devices, and "air-internal" like a host cabled to every spine.
"""
from __future__ import annotations

import re

from engine.topology_load.common import (
    EXPECTED,
    TopologyError,
    TopologySpec,
    Warnings,
    canonical_role,
    names,
    role_from_name,
)

NON_FABRIC_FUNCTIONS = frozenset(
    {"oob-switch", "oob-server", "oob-mgmt-switch", "oob-mgmt-server", "internet", "fake"}
)



def parse_dot(text: str, *, source: str) -> TopologySpec:
    """The devices, roles and links of a DOT file; non-fabric devices left out."""
    nodes, edges = _DotParser(_dot_tokens(text, source=source), source=source).parse()
    roles: dict[str, str] = {}
    excluded: dict[str, str] = {}
    warnings = Warnings()
    for name, (attrs, line) in nodes.items():
        raw = attrs.get("role", attrs.get("function"))
        function = raw.strip().lower() if raw is not None else None
        if function is None:
            roles[name] = role_from_name(name)
            warnings.add("no function or role attribute, role guessed from the name", f"{name} ({roles[name]})")
        elif function in NON_FABRIC_FUNCTIONS:
            excluded[name] = f'function="{function}"'
        elif (role := canonical_role(raw)) is not None:
            roles[name] = role
        else:
            raise TopologyError(
                f"{source}, line {line}: device {name}: unknown function {raw!r} ({EXPECTED}; "
                f"or one left out of the fabric: {', '.join(sorted(NON_FABRIC_FUNCTIONS))})"
            )
    pairs: list[tuple[str, str]] = []
    where: list[str] = []
    left_out = 0
    for (dev_a, port_a), (dev_b, port_b), line in edges:
        if dev_a in excluded or dev_b in excluded:
            left_out += 1
            continue
        for dev in (dev_a, dev_b):
            if dev not in roles:  # a device seen only in edges
                roles[dev] = role_from_name(dev)
                warnings.add("device only in edges, role guessed from the name", f"{dev} ({roles[dev]})")
        pairs.append((f"{dev_a}:{port_a}", f"{dev_b}:{port_b}"))
        where.append(f"{source}, line {line}")
    notes = warnings.lines(source)
    if excluded:
        listed = [f"{d} ({why})" for d, why in excluded.items()]
        notes = (f"{source}: left out of the data fabric with their {left_out} link(s) (not in any path): "
                 + names(listed),) + notes
    return TopologySpec(roles=roles, links=pairs, where=where, warnings=notes, excluded=excluded)


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
