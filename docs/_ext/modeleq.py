"""Equation numbers of docs/model.md and links to them from the docstrings.

docs/model.md numbers its equations by section, ``(1.1)`` to ``(10.6)``, and the code cites them
as ``docs/model.md (3.3)``. This extension keeps those numbers in the built site:

* an equation labelled ``eq-3-3`` (MyST ``$$ ... $$ (eq-3-3)``) is numbered ``(3.3)``, not by
  its position on the page, and ``{eq}`eq-3-3``` shows ``(3.3)`` too;
* a numbered section whose equations are written in the prose has a target ``(eq-5-1)=`` on its
  heading instead;
* in the docstrings that autodoc reads, every ``docs/model.md (3.3)`` (also ``(1.1)-(1.3)``,
  ``(4.2), (4.3)``, ``(8.3)-(8.4)`` lists) becomes a link to the equation, and so do the bare
  labels (``the test error (4.2)``) of a paragraph with such a citation; the wording of the
  docstring is kept, only the labels turn into references. A cited label that model.md lacks
  is left as text and reported as a warning (the build runs with ``-W``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the parsing functions are used by the tests, without Sphinx
    from docutils import nodes
    from sphinx.application import Sphinx

#: a math label of model.md, ``eq-<section>-<number>``
EQ_LABEL = re.compile(r"^eq-(\d+)-(\d+)$")
#: one citation: the file name, then one or more labels joined by ``-``, ``,``, ``and`` or ``or``
_ONE = r"\(\d+\.\d+\)"
CITATION = re.compile(
    r"(?P<file>``docs/model\.md``|docs/model\.md)(?P<gap>\s+)"
    rf"(?P<labels>{_ONE}(?:(?:\s*[-,]\s*|\s+and\s+|\s+or\s+){_ONE})*)"
)
LABEL = re.compile(r"\((\d+)\.(\d+)\)")


def label_name(section: str, number: str) -> str:
    """The label of equation ``(section.number)`` of model.md, e.g. ``eq-3-3``."""
    return f"eq-{section}-{number}"


def model_labels(text: str) -> tuple[set[str], set[str]]:
    """``(math, sections)``: the equation labels of model.md's source ``text`` (``$$ ... $$
    (eq-x-y)``) and the section targets (``(eq-x-y)=`` on a heading)."""
    math = set(re.findall(r"^\s*\$\$ \((eq-\d+-\d+)\)\s*$", text, flags=re.M))
    sections = set(re.findall(r"^\((eq-\d+-\d+)\)=\s*$", text, flags=re.M))
    return math, sections


#: characters that may stand before and after a role in reStructuredText inline markup
_BEFORE = frozenset(" \t\n-:/'\"<([{")
_AFTER = frozenset(" \t\n-.,:;!?\\/'\")]}>")


def link_citations(text: str, math: set[str], sections: set[str]) -> tuple[str, list[str]]:
    """``text`` with its model.md labels turned into references: ``:eq:`` for an equation,
    ``:ref:`` for a section target.

    The labels of a citation (``docs/model.md (4.2), (4.3)``) are linked, and so are the bare
    labels (``the test error (4.2)``) of a paragraph that cites model.md: there they are the same
    equations, named without the file. A bare label that model.md lacks stays text (it may be a
    number in brackets); the labels of a citation that model.md lacks are returned as missing
    (and stay text). Nothing inside ````literal```` text changes, and a label is linked only
    where reStructuredText allows a role (a space or bracket before it, punctuation after).
    """
    known = math | sections
    missing: list[str] = []
    breaks = [m.start() for m in re.finditer(r"\n[ \t]*\n", text)]

    def paragraph(i: int) -> int:
        return sum(b < i for b in breaks)

    def literal(i: int) -> bool:
        return text.count("``", 0, i) % 2 == 1

    def fits(m: re.Match[str]) -> bool:
        before = text[m.start() - 1] if m.start() else " "
        after = text[m.end()] if m.end() < len(text) else " "
        return before in _BEFORE and after in _AFTER

    edits: dict[int, tuple[int, str]] = {}  # start -> (end, role)

    def link(m: re.Match[str]) -> None:
        name = label_name(m.group(1), m.group(2))
        role = f":eq:`{name}`" if name in math else f":ref:`{m.group(0)} <{name}>`"
        edits[m.start()] = (m.end(), role)

    cited: set[int] = set()
    for c in CITATION.finditer(text):
        if literal(c.start("file")):
            continue
        cited.add(paragraph(c.start()))
        for m in LABEL.finditer(text, c.start("labels"), c.end("labels")):
            if label_name(m.group(1), m.group(2)) in known and fits(m):
                link(m)
            else:
                missing.append(m.group(0))
    for m in LABEL.finditer(text):
        if (m.start() not in edits and paragraph(m.start()) in cited and not literal(m.start())
                and label_name(m.group(1), m.group(2)) in known and fits(m)):
            link(m)
    out: list[str] = []
    pos = 0
    for start in sorted(edits):
        end, role = edits[start]
        out += [text[pos:start], role]
        pos = end
    out.append(text[pos:])
    return "".join(out), missing


def _read_labels(app: Sphinx) -> None:
    model = Path(app.srcdir) / "model.md"
    app.env.modeleq_labels = model_labels(model.read_text(encoding="utf-8"))  # type: ignore[attr-defined]


def _process_docstring(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    from sphinx.util import logging

    math, sections = app.env.modeleq_labels  # type: ignore[attr-defined]
    text, missing = link_citations("\n".join(lines), math, sections)
    for label in missing:
        logging.getLogger(__name__).warning("%s cites docs/model.md %s, which model.md does not have", name, label, type="modeleq")
    lines[:] = text.split("\n")


def _number_equations(app: Sphinx, doctree: nodes.document) -> None:
    """Number every ``eq-x-y`` equation ``x.y`` (on the page and in the math domain)."""
    from docutils import nodes

    domain = app.env.domains["math"]
    for node in doctree.findall(nodes.math_block):
        m = EQ_LABEL.match(node.get("label") or "")
        if m:
            number = f"{m.group(1)}.{m.group(2)}"
            node["number"] = number
            docname, _ = domain.equations[node["label"]]
            domain.equations[node["label"]] = (docname, number)


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("builder-inited", _read_labels)
    app.connect("autodoc-process-docstring", _process_docstring)
    app.connect("doctree-read", _number_equations)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
