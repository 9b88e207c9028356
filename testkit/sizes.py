"""The size audit: Python files over MAX_FILE_LINES lines and functions over
MAX_FUNCTION_LINES lines, and the ones docs/design.md's "Long files and functions" section
lists with a reason. `python -m testkit.sizes` prints both; tests/test_sizes.py fails on a
long one the section does not list."""
from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60
SECTION = "## Long files and functions"
SKIP_DIRS = {"venv", "build", "dist", "__pycache__", "node_modules"}


class Long(NamedTuple):
    name: str  # `path` for a file, `path::Class.function` for a function
    lines: int


def python_files(root: Path = ROOT) -> Iterator[Path]:
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts[:-1]
        if not any(p.startswith(".") or p in SKIP_DIRS or p.endswith(".egg-info") for p in parts):
            yield path


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.AST]]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = prefix + node.name
            if not isinstance(node, ast.ClassDef):
                yield name, node
            yield from _functions(node, name + ".")


def long_ones(root: Path = ROOT) -> list[Long]:
    """Every file and function over the limits, files first, in path order."""
    files, functions = [], []
    for path in python_files(root):
        rel = path.relative_to(root).as_posix()
        text = path.read_text()
        n = len(text.splitlines())
        if n > MAX_FILE_LINES:
            files.append(Long(rel, n))
        for name, node in _functions(ast.parse(text, filename=rel)):
            size = node.end_lineno - node.lineno + 1
            if size > MAX_FUNCTION_LINES:
                functions.append(Long(f"{rel}::{name}", size))
    return files + functions


def listed(design: Path = ROOT / "docs" / "design.md") -> dict[str, str]:
    """The section's entries, `- \\`name\\` (N lines): reason`, by name."""
    text = design.read_text()
    start = text.find(SECTION)
    if start < 0:
        return {}
    body = text[start + len(SECTION):]
    end = re.search(r"^## ", body, flags=re.M)
    body = body[:end.start()] if end else body
    return {m[1]: m[2].strip() for m in re.finditer(r"^- `([^`]+)`[^:\n]*:(.*)$", body, flags=re.M)}


def main() -> int:
    known = listed()
    found = long_ones()
    for item in found:
        mark = " " if item.name in known else "!"
        print(f"{mark} {item.lines:5d}  {item.name}")
    unlisted = [i.name for i in found if i.name not in known]
    stale = sorted(set(known) - {i.name for i in found})
    if stale:
        print(f"listed in docs/design.md but no longer long (remove them): {', '.join(stale)}", file=sys.stderr)
    if unlisted:
        print(f"{len(unlisted)} over {MAX_FILE_LINES} lines (file) or {MAX_FUNCTION_LINES} (function) and not "
              f"listed with a reason in docs/design.md's \"{SECTION[3:]}\" (marked !)", file=sys.stderr)
    return 1 if unlisted else 0


if __name__ == "__main__":
    sys.exit(main())
