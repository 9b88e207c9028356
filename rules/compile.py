"""Compile a measurement's rules into one Python function (once, at start).

Evaluating conditions one object at a time costs most of the hot path; the compiled
check reads each feature once and tests every rule in straight-line code. Its meaning
is exactly `Rule.matches`: a missing feature, or one of the other type (a string where
a number is expected, or the reverse), makes a condition false.
"""
from __future__ import annotations

from typing import Callable

from rules.schema import Condition, Rule

_NUMBERS = frozenset((int, float))


def _expr(c: Condition, var: str) -> str:
    if isinstance(c.value, str):
        return f"({var}.__class__ is str and {var} {c.op} {c.value!r})"
    return f"({var}.__class__ in NUM and {var} {c.op} {float(c.value)!r})"


def compile_rules(rules: tuple[Rule, ...]) -> Callable[[dict], list[Rule]]:
    """check(features) -> the rules whose condition holds, in the order given."""
    names = sorted({c.feature for r in rules for c in (*r.all, *r.any)})
    var = {n: f"v{i}" for i, n in enumerate(names)}
    src = ["def check(f):", "    g = f.get", "    out = []"]
    src += [f"    {var[n]} = g({n!r})" for n in names]
    for j, r in enumerate(rules):
        parts = []
        if r.all:
            parts.append(" and ".join(_expr(c, var[c.feature]) for c in r.all))
        if r.any:
            parts.append("(" + " or ".join(_expr(c, var[c.feature]) for c in r.any) + ")")
        src.append(f"    if {' and '.join(parts) or 'True'}:")
        src.append(f"        out.append(RULES[{j}])")
    src.append("    return out")
    namespace = {"RULES": rules, "NUM": _NUMBERS}
    exec(compile("\n".join(src), f"<rules for {rules[0].measurement if rules else '-'}>", "exec"), namespace)
    return namespace["check"]
