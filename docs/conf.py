"""Sphinx configuration of the attnphase documentation site.

Build (from the repository root, after ``python -m pip install -c constraints.txt -e ".[docs]"``)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

Before Sphinx reads the sources this file writes two generated parts of the site, both ignored
by git: ``docs/examples/`` (copies of the notebooks in ``examples/``, executed by myst-nb on every
build) and ``docs/cli-reference.md`` (the ``--help`` of every command, from the package's own
argument parser). The build documents and runs the package of this checkout (``src/``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
SRC = ROOT / "src"

# Autodoc and the notebook kernels (child processes) import the package of this checkout.
sys.path.insert(0, str(SRC))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p)
# The kernels draw with matplotlib's inline backend, whose figures become the cells' outputs (a
# backend such as Agg, which CI sets for the tests, would draw them nowhere).
os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"

import attnphase  # noqa: E402

project = "attnphase"
author = "the attnphase authors"
copyright = "the attnphase authors"
release = attnphase.__version__
version = release

extensions = [
    "myst_nb",  # MyST Markdown pages and Jupytext MyST notebooks (includes myst_parser)
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.viewcode",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "data", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints"]

# -- MyST -------------------------------------------------------------------------------------
# The equations of model.md are plain-text blocks, not TeX: no math extension is needed. Heading
# anchors let the pages link to each other's sections as on GitHub (``solver.md#accuracy``).
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 4

# -- notebooks (myst-nb) ----------------------------------------------------------------------
# Every notebook runs on every build; an error in a cell fails the build.
nb_execution_mode = "force"
nb_execution_timeout = 300
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True

# -- API reference (autodoc + autosummary) ----------------------------------------------------
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": True}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
add_module_names = False


def _shared_with_top_level() -> dict[str, list[str]]:
    """Per subpackage, the names it exports that are the very objects of the top-level API
    (``attnphase.theory.SolverSettings`` is ``attnphase.SolverSettings``): the subpackage's page
    points to the top-level page instead of documenting them twice."""
    import importlib

    top = {id(getattr(attnphase, n)) for n in attnphase.__all__}
    shared = {}
    for sub in ("attnphase.theory", "attnphase.sim", "attnphase.sweeps"):
        mod = importlib.import_module(sub)
        shared[sub] = [n for n in mod.__all__ if id(getattr(mod, n)) in top]
    return shared


autosummary_context = {"shared": _shared_with_top_level()}

# -- HTML -------------------------------------------------------------------------------------
html_theme = "furo"
html_title = f"attnphase {release}"
html_last_updated_fmt = None
html_show_sourcelink = False


# -- generated sources --------------------------------------------------------------------------


def _copy_if_changed(src: Path, dst: Path) -> None:
    """Copy ``src`` to ``dst`` unless ``dst`` already has its bytes (keeps incremental builds)."""
    if dst.exists() and dst.read_bytes() == src.read_bytes():
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)


def copy_examples() -> None:
    """``examples/*.md`` -> ``docs/examples/`` (the notebooks live at the top of the repository)."""
    out = DOCS / "examples"
    wanted = {p.name: p for p in sorted((ROOT / "examples").glob("*.md")) if p.name != "README.md"}
    if out.exists():
        for old in out.glob("*.md"):
            if old.name not in wanted:
                old.unlink()
    for name, path in wanted.items():
        _copy_if_changed(path, out / name)


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """``(name, one-line help, parser)`` of each sub-command of ``parser``, in registration order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            return [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]
    return []


def write_cli_reference() -> None:
    """``docs/cli-reference.md``: the commands table and each command's ``--help``, as printed."""
    from attnphase.cli import build_parser

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps the help to the terminal's width
    try:
        parser = build_parser()
        lines = [
            "# Command reference",
            "",
            "<!-- generated by docs/conf.py from the package's argument parser; not in git -->",
            "",
            "The help that `attnphase COMMAND --help` prints, for every command of this version "
            f"({release}). What the commands compute and how to read their output is in the user guide.",
            "",
            "| command | what it does |",
            "| --- | --- |",
        ]
        commands = _subcommands(parser)
        lines += [f"| [`{name}`](#attnphase-{name}) | {text} |" for name, text, _ in commands]
        lines += ["", "```text", parser.format_help().rstrip(), "```", ""]
        for name, _, sub in commands:
            lines += [f"## attnphase {name}", "", "```text", sub.format_help().rstrip(), "```", ""]
            for sname, _, subsub in _subcommands(sub):
                lines += [f"### attnphase {name} {sname}", "", "```text", subsub.format_help().rstrip(), "```", ""]
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    text = "\n".join(lines)
    dst = DOCS / "cli-reference.md"
    if not dst.exists() or dst.read_text() != text:
        dst.write_text(text)


copy_examples()
write_cli_reference()
