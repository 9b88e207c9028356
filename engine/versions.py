"""Version guards of the couplings to other libraries' private internals.

A few speed tricks and fixes reach into a library's private attributes (listed in
docs/design.md, "Couplings to private internals"). Each such module says which versions
of the library it was checked against and calls `require` at import: outside that range
the process stops at start with a message naming the module to re-check, rather than
misbehaving quietly after an upgrade.
"""
from __future__ import annotations

import re
from importlib import metadata


class UnsupportedVersion(RuntimeError):
    """An installed library is outside the range a coupling to its internals was checked against."""


def release(version: str) -> tuple[int, ...]:
    """The release numbers of a version string ("1.9.1" -> (1, 9, 1); "0.15.3rc1" -> (0, 15, 3))."""
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", version)
    if m is None:
        raise UnsupportedVersion(f"cannot read the version {version!r}")
    return tuple(int(p) for p in m.group(1).split("."))


def installed(distribution: str) -> str:
    return metadata.version(distribution)


def require(distribution: str, low: str, below: str, where: str) -> str:
    """The installed version of `distribution`, if low <= it < below; else UnsupportedVersion."""
    version = installed(distribution)
    if not release(low) <= release(version) < release(below):
        raise UnsupportedVersion(
            f"{where} reaches into private internals of {distribution}, checked against versions >= {low}, < {below}; "
            f"{distribution} {version} is installed: install a version in that range, or re-check the couplings "
            f"listed in {where} against {version} and widen its range")
    return version
