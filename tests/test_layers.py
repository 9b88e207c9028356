"""Imports run one way: contract <- rules <- engine <- models <- compose <- evaluation and the adapters.

Read off the source with `ast` (no import is executed), so a wrong-way import fails
here even in a module no other test loads, and even inside a function.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("contract", "rules", "engine", "models", "compose", "sim", "evaluation", "api", "streams", "cli", "notify")
FRAMEWORKS = ("faust", "kafka", "aiokafka", "sqlmodel", "sqlalchemy", "fastapi", "uvicorn", "mode")

# package -> the project packages (and frameworks) it must never import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "contract": PROJECT[1:] + FRAMEWORKS,
    "rules": ("engine", "models", "compose", "sim", "evaluation", "api", "streams", "cli", "notify") + FRAMEWORKS,
    # the core sends nothing itself: no notifier, no HTTP client (notifications are an adapter)
    "engine": ("models", "compose", "sim", "evaluation", "api", "streams", "cli", "notify", "httpx") + FRAMEWORKS,
    "models": ("compose", "sim", "evaluation", "api", "streams", "cli", "notify") + FRAMEWORKS,
    # the composition root: builds the core's parts for every entry point, adapters included
    "compose": ("sim", "evaluation", "api", "streams", "cli", "notify") + FRAMEWORKS,
    "sim": ("engine", "rules", "models", "compose", "evaluation", "api", "streams", "cli") + FRAMEWORKS,
    "evaluation": ("sim", "api", "streams") + FRAMEWORKS,
    "api": ("streams", "cli", "sim", "evaluation"),
    "streams": ("cli", "sim", "evaluation"),
}


def imports_of(path: Path) -> set[str]:
    """Top-level names of every module `path` imports, anywhere in the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def wrong_way(package: str) -> list[str]:
    banned = FORBIDDEN[package]
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for name in sorted(imports_of(path) & set(banned)):
            found.append(f"{path.relative_to(ROOT)} imports {name}")
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_import_runs_the_wrong_way(package):
    assert wrong_way(package) == []


def test_the_check_sees_a_wrong_way_import(tmp_path):
    """The checker itself: an import inside a function is found too."""
    f = tmp_path / "x.py"
    f.write_text("def f():\n    from engine.pipeline import Pipeline\n    import faust.app\n")
    assert imports_of(f) >= {"engine", "faust"}


def test_cli_modules_do_not_import_each_other_in_a_cycle():
    """`cli/` is the command table and its handlers: a handler module never imports
    the table back."""
    edges = {}
    for path in (ROOT / "cli").glob("*.py"):
        tree = ast.parse(path.read_text())
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cli."):
                deps.add(node.module.split(".")[1])
            elif isinstance(node, ast.Import):
                deps.update(a.name.split(".")[1] for a in node.names if a.name.startswith("cli."))
        edges[path.stem] = deps
    cycles = sorted(f"cli/{a}.py <-> cli/{b}.py" for a in edges for b in edges[a] if a < b and a in edges.get(b, ()))
    assert cycles == []
