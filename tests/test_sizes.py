"""The size limits of STYLE.md (files under ~400 lines, functions under ~60): a file or
function over them fails here unless docs/design.md's "Long files and functions" section
lists it with a reason (`scripts/sizes` prints the whole audit)."""
from testkit.sizes import MAX_FILE_LINES, MAX_FUNCTION_LINES, SECTION, Long, listed, long_ones


def test_every_long_file_and_function_is_listed_with_a_reason():
    known = listed()
    unlisted = [f"{i.name} ({i.lines} lines)" for i in long_ones() if i.name not in known]
    assert not unlisted, (f"over {MAX_FILE_LINES} lines (file) or {MAX_FUNCTION_LINES} (function): split it, "
                          f"or list it with a reason in docs/design.md's {SECTION!r}: {unlisted}")
    assert all(known.values()), [name for name, why in known.items() if not why]  # each with its reason


def test_the_audit_finds_long_files_and_functions(tmp_path):
    (tmp_path / "pkg").mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    method = "\n".join("    " + line for line in body.splitlines())
    (tmp_path / "pkg" / "big.py").write_text(
        f"class A:\n    async def m(self):\n{method}\n        return 0\n\n\ndef short():\n    return 1\n"
        + "\n" * MAX_FILE_LINES)
    (tmp_path / "pkg" / "small.py").write_text("def f():\n" + "\n".join(body.splitlines()[1:]) + "\n")  # at the limit
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "huge.py").write_text("\n" * 1000)  # not the project's
    found = long_ones(tmp_path)
    assert found == [Long("pkg/big.py", MAX_FILE_LINES + MAX_FUNCTION_LINES + 7),
                     Long("pkg/big.py::A.m", MAX_FUNCTION_LINES + 2)]


def test_listed_reads_only_its_own_section(tmp_path):
    design = tmp_path / "design.md"
    design.write_text(f"# x\n- `a.py`: not this one\n{SECTION}\n\nintro\n\n- `b.py` (500 lines): it must\n"
                      "- `c.py::f` (70 lines): one table\n\n## Next\n- `d.py`: nor this\n")
    assert listed(design) == {"b.py": "it must", "c.py::f": "one table"}
