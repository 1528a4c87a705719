"""Sphinx configuration of the attnphase documentation site.

Build (from the repository root, after ``python -m pip install -c constraints.txt -e ".[docs]"``)::

    python -m sphinx -W -n --keep-going -b html docs docs/_build/html

Before Sphinx reads the sources this file writes four generated parts of the site, all ignored
by git: ``docs/examples/`` (copies of the notebooks in ``examples/``, executed by myst-nb on every
build), ``docs/cli-reference.md`` (the ``--help`` of every command, from the package's own
argument parser), ``docs/_generated/attention-models.md`` (the registry of attention models) and
``docs/_generated/modelspec-fields.md`` (the table of ``ModelSpec``'s
fields, from its schema). The build documents and runs the package of this checkout (``src/``).

The equations of ``docs/model.md`` are LaTeX (MyST ``dollarmath``), typeset in the browser by
MathJax; the local extension ``docs/_ext/modeleq.py`` numbers them as model.md does (``(3.3)``)
and links the docstrings' citations ``docs/model.md (3.3)`` to them.
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
sys.path.insert(0, str(DOCS / "_ext"))  # local Sphinx extensions
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
    "sphinx.ext.intersphinx",
    "napoleon_sections",  # docs/_ext: sphinx.ext.napoleon's numpydoc sections, attributes as written
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "modeleq",  # docs/_ext: model.md's equation numbers, docstring citations as links
    "internal_refs",  # docs/_ext: references to attnphase names without a page of their own
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "_generated", "data", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints"]

# Plain ASCII stays plain: ``--simulate`` in the help texts of the command tables must not become
# an en dash, nor quotes curly ones.
smartquotes = False

# -- MyST -------------------------------------------------------------------------------------
# Displayed equations are ``$$ ... $$ (eq-3-3)`` (dollarmath; the label numbers the equation, see
# docs/_ext/modeleq.py), amsmath environments are allowed at the top level. Heading anchors let
# the pages link to each other's sections as on GitHub (``solver.md#accuracy``).
myst_enable_extensions = ["colon_fence", "dollarmath", "amsmath"]
myst_heading_anchors = 4

# -- maths (MathJax) --------------------------------------------------------------------------
# MathJax (4, Sphinx's default CDN address) is loaded by the browser when a page is viewed; the build
# itself needs no network. ``(3.3)``-style numbers are written into the HTML by Sphinx, not by
# MathJax, so they show even where MathJax cannot load.
math_eqref_format = "({number})"

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

# numpydoc-style sections (Parameters, Returns, Raises, Attributes) through napoleon.
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
napoleon_use_ivar = True
napoleon_preprocess_types = True
# the words the docstrings use as types, linked where Sphinx knows the name
napoleon_type_aliases = {
    "mapping": ":class:`~collections.abc.Mapping`",
    "sequence": ":class:`~collections.abc.Sequence`",
    "callable": ":class:`~collections.abc.Callable`",
    "matrix": ":abbr:`matrix (rows of numbers: a tuple of tuples, an array, or text such as '0.6,0.4;0.4,0.6')`",
    "ModelSpec": ":class:`~attnphase.ModelSpec`",
    "SolverSettings": ":class:`~attnphase.SolverSettings`",
    "SolveResult": ":class:`~attnphase.SolveResult`",
    "BranchResult": ":class:`~attnphase.BranchResult`",
    "TransitionResult": ":class:`~attnphase.TransitionResult`",
    "SimulationResult": ":class:`~attnphase.SimulationResult`",
    "BayesResult": ":class:`~attnphase.BayesResult`",
    "TrainSettings": ":class:`~attnphase.sim.TrainSettings`",
    "RunResult": ":class:`~attnphase.sim.RunResult`",
}

# -- links to other projects (intersphinx) -----------------------------------------------------
# Python, numpy, scipy, pandas, torch and matplotlib names link to those projects' online pages.
# The build reads no network: docs/_ext/inventories.py writes the inventories of the names the API
# uses (ignored by git) and intersphinx reads them from disk.
from inventories import write_inventories  # noqa: E402  (docs/_ext, on sys.path above)

intersphinx_mapping = write_inventories(DOCS / "_generated" / "inventories")
intersphinx_disabled_reftypes = ["std:doc"]


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


def _write_if_changed(dst: Path, text: str) -> None:
    """Write ``text`` to ``dst`` unless it holds it already (keeps incremental builds)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if not dst.exists() or dst.read_text() != text:
        dst.write_text(text)


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


#: the characters per line that a code block of the theme shows without scrolling (furo's content
#: column at its widest, checked in Chromium)
HELP_WIDTH = 88


def write_cli_reference() -> None:
    """``docs/cli-reference.md``: the commands table and each command's ``--help``, as printed."""
    from attnphase.cli import build_parser

    old = os.environ.get("COLUMNS")
    # argparse wraps the help to the terminal's width (COLUMNS - 2): the width of a code block in
    # the theme's content column, so that no line of the help is cut off
    os.environ["COLUMNS"] = str(HELP_WIDTH + 2)
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
    _write_if_changed(DOCS / "cli-reference.md", text)


def _cell(text: str) -> str:
    """``text`` safe in a Markdown table cell (no emphasis, links, HTML or column breaks)."""
    for ch in "\\`*_[]<>|":
        text = text.replace(ch, "\\" + ch)
    return text


def write_model_fields() -> None:
    """``docs/_generated/modelspec-fields.md``: one row per field of ``ModelSpec``, read from its
    schema (``attnphase.spec.problem.model_parameters``), so that the table lists what the
    dataclass, its validation and the command-line flags actually have."""
    from attnphase.spec.problem import model_parameters

    params = model_parameters()
    lines = [
        "<!-- generated by docs/conf.py from attnphase.spec.problem.model_parameters(); not in git -->",
        "",
        f"`ModelSpec` has {len(params)} fields. Each is also a keyword of the library's functions "
        "(`**model`) and a command-line flag: the field's name with `--` before it and `-` for `_` "
        "(`teacher_rank`: `--teacher-rank`) unless the table names another.",
        "",
        "| field | type | default | allowed | what it is |",
        "| --- | --- | --- | --- | --- |",
    ]
    for p in params:
        info = p.info
        if info.choices:
            allowed = ", ".join(f"`{c}`" for c in info.choices)
        elif info.minimum is not None and info.maximum is not None:
            allowed = f"[{info.minimum:g}, {info.maximum:g}]"
        elif info.minimum is not None:
            allowed = f"{'>' if info.strict_minimum else '>='} {info.minimum:g}"
        else:
            allowed = ""
        default = "unset" if p.default is None else f"`{p.text_default}`"
        what = _cell(info.help)
        if p.flag != "--" + p.name.replace("_", "-"):
            what += f" (flag `{p.flag}`)"
        lines.append(f"| `{p.name}` | {p.kind} | {default} | {allowed} | {what} |")
    text = "\n".join(lines) + "\n"
    _write_if_changed(DOCS / "_generated" / "modelspec-fields.md", text)


def write_attention_models() -> None:
    """``docs/_generated/attention-models.md``: one row per registered attention model
    (``attnphase.spec.attention.MODELS``), with what covers it and its conformance point, then one
    row per mask (``attnphase.spec.attention.MASKS``)."""
    from attnphase.spec.attention import MASKS, MODELS, SUPPORTS

    lines = [
        "<!-- generated by docs/conf.py from attnphase.spec.attention.MODELS; not in git -->",
        "",
        "| `variant` | scores | mask | " + " | ".join(SUPPORTS) + " | written-out kernels (L, rank) | conformance point | what it is |",
        "| --- | --- | --- | " + " | ".join("---" for _ in SUPPORTS) + " | --- | --- | --- |",
    ]
    for m in MODELS.values():
        cover = " | ".join("yes" if m.covers(part) else "" for part in SUPPORTS)
        kernels = ", ".join(f"({L}, {r})" for L, r, _ in m.written_out) or "none (generic kernel)"
        c = m.conformance
        point = ", ".join([*(f"{k} = {v}" for k, v in c.changes.items()), f"alpha = {c.alpha:g}", c.branch,
                           f"within {100 * c.tolerance:g} %"])
        lines.append(f"| `{m.name}` | `{m.score_form}` | {m.mask} | {cover} | {kernels} | {point} | {_cell(m.description)} |")
    lines += ["", "| mask | which scores a token attends to |", "| --- | --- |"]
    lines += [f"| {k.name} | {_cell(k.description)} |" for k in MASKS.values()]
    text = "\n".join(lines) + "\n"
    _write_if_changed(DOCS / "_generated" / "attention-models.md", text)


copy_examples()
write_cli_reference()
write_model_fields()
write_attention_models()
