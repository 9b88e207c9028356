"""The couplings to other libraries' private internals stop the process at import when
the installed version is outside the range they were checked against (engine.versions)."""
from __future__ import annotations

import importlib

import pytest

from engine import versions
from engine.versions import UnsupportedVersion, release, require


def test_release_reads_the_numbers_of_a_version():
    assert release("1.9.1") == (1, 9, 1)
    assert release("0.15.3rc1") == (0, 15, 3)
    assert release("1.10") > release("1.9.1")  # numbers, not text
    with pytest.raises(UnsupportedVersion, match="cannot read the version 'dev'"):
        release("dev")


def test_require_takes_the_range_half_open():
    fake = {"lib": "1.10.0"}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(versions, "installed", fake.__getitem__)
        assert require("lib", "1.9", "1.11", where="x.py") == "1.10.0"
        with pytest.raises(UnsupportedVersion, match=r"checked against versions >= 1.9, < 1.10; lib 1.10.0 is installed"):
            require("lib", "1.9", "1.10", where="x.py")


@pytest.mark.parametrize("module,distribution", [
    ("streams.transport", "faust-streaming"),
    ("streams.transport", "mode-streaming"),
    ("streams.transport", "aiokafka"),
])
@pytest.mark.parametrize("version", ["99.0.0", "0.0.1"])
def test_an_unchecked_version_stops_the_import_with_a_clear_message(monkeypatch, module, distribution, version):
    """Guard per coupling: the installed versions pass (the module imports); a version
    outside the checked range, above or below, raises naming the module to re-check."""
    mod = importlib.import_module(module)
    saved = dict(mod.__dict__)  # put back after: other modules hold its classes
    real = versions.installed
    monkeypatch.setattr(versions, "installed", lambda d: version if d == distribution else real(d))
    where = module.replace(".", "/") + ".py"
    try:
        with pytest.raises(UnsupportedVersion, match=rf"{where} reaches into private internals of {distribution}, "
                                                     rf"checked against versions .*; {distribution} {version} is installed"):
            importlib.reload(mod)
    finally:
        mod.__dict__.update(saved)
