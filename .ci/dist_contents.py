"""Check what the wheel and the sdist hold (used by ``.ci/wheel``).

    python .ci/dist_contents.py REPO WHEEL SDIST

The wheel must hold exactly the package's files (``src/attnphase``, as ``git ls-files`` lists
them, untracked files that git does not ignore included: that is what ``.ci/wheel`` builds from)
and its ``.dist-info``, so no tests, docs or caches, and every file the package reads at run time
(the C source ``kernels.c``, the ``py.typed`` marker). The sdist must hold those files, the tests
with their data, the docs, ``README.md``, ``CHANGELOG.md``, ``pyproject.toml`` and
``constraints.txt``, and no compiled Python. Prints every problem, one per line, and exits with
status 1 if there is one.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

PACKAGE = "attnphase"
#: what the sdist carries besides the package (MANIFEST.in)
SDIST_TREES = ("src", "tests", "docs")
SDIST_FILES = ("README.md", "LICENSE", "CHANGELOG.md", "pyproject.toml", "constraints.txt", "MANIFEST.in")


def listed(repo: Path, *paths: str) -> set[str]:
    """The files under ``paths`` that git tracks or would track (relative to ``repo``), that exist."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *paths],
                         cwd=repo, capture_output=True, text=True, check=True).stdout
    return {p for p in out.split("\0") if p and (repo / p).is_file()}


def wheel_problems(repo: Path, wheel: Path) -> list[str]:
    names = {n for n in zipfile.ZipFile(wheel).namelist() if not n.endswith("/")}
    inside = {n for n in names if n.startswith(f"{PACKAGE}/")}
    meta = {n for n in names if n.split("/")[0].endswith(".dist-info")}
    want = {p.removeprefix("src/") for p in listed(repo, f"src/{PACKAGE}")}
    out = [f"wheel: missing {n}" for n in sorted(want - inside)]
    out += [f"wheel: unexpected {n}" for n in sorted(inside - want)]
    out += [f"wheel: outside the package: {n}" for n in sorted(names - inside - meta)]
    return out


def sdist_problems(repo: Path, sdist: Path) -> list[str]:
    with tarfile.open(sdist) as tar:
        members = [m.name for m in tar.getmembers() if m.isfile()]
    top = {m.split("/")[0] for m in members}
    if len(top) != 1:
        return [f"sdist: expected one top folder, found {sorted(top)}"]
    names = {m.split("/", 1)[1] for m in members if "/" in m}
    want = listed(repo, *SDIST_TREES) | set(SDIST_FILES)
    out = [f"sdist: missing {n}" for n in sorted(want - names)]
    out += [f"sdist: compiled Python {n}" for n in sorted(names) if "__pycache__" in n or n.endswith(".pyc")]
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python .ci/dist_contents.py REPO WHEEL SDIST", file=sys.stderr)
        return 2
    repo, wheel, sdist = (Path(a) for a in args)
    found = wheel_problems(repo, wheel) + sdist_problems(repo, sdist)
    for line in found:
        print(line)
    if found:
        print(f"dist_contents: {len(found)} problem(s)", file=sys.stderr)
        return 1
    print(f"dist_contents: {wheel.name} holds the package, {sdist.name} the sources, tests and docs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
