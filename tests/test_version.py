"""The version is written once, in ``src/attnphase/_version.py``: the package metadata, the
``--version`` of the command line and the records read it from there."""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - (Python 3.10: the tomli dependency)
    import tomli as tomllib

import attnphase
from attnphase import cli

ROOT = Path(__file__).resolve().parents[1]
#: a final release or a pre-/post-/dev-release of PEP 440, without local labels
RELEASE = re.compile(r"\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?")


def test_the_version_is_a_release_number() -> None:
    assert RELEASE.fullmatch(attnphase.__version__), attnphase.__version__


def test_pyproject_reads_the_version_from_the_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"], "pyproject.toml must not write the version itself"
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "attnphase._version.__version__"}


def test_the_installed_metadata_has_the_package_version() -> None:
    try:
        installed = metadata.version("attnphase")
    except metadata.PackageNotFoundError:
        pytest.fail("attnphase is not installed: python -m pip install -e .")
    assert installed == attnphase.__version__, (
        f"the installed metadata says {installed}, the package {attnphase.__version__}: "
        "the installation is stale or from another checkout (python -m pip install -e .)")


def test_the_command_line_prints_the_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        cli.main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"attnphase {attnphase.__version__}"
