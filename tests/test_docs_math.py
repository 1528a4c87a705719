"""docs/model.md: typeset equations, one label per numbered equation, every citation in the code
resolvable.

The docstrings cite the equations as ``docs/model.md (3.3)``; the docs build
(``docs/_ext/modeleq.py``) turns each citation into a link to the label ``eq-3-3``. These tests
use that extension's own parser (it imports without Sphinx), so a citation that they accept is
one the site links.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "docs" / "model.md"


def _load_modeleq() -> ModuleType:
    spec = importlib.util.spec_from_file_location("modeleq", ROOT / "docs" / "_ext" / "modeleq.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


modeleq = _load_modeleq()


@pytest.fixture(scope="module")
def model_text() -> str:
    return MODEL.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def labels(model_text: str) -> tuple[set[str], set[str]]:
    return modeleq.model_labels(model_text)


def _fences(text: str) -> list[tuple[int, str]]:
    """``(line, info string)`` of every opening code fence of a Markdown text."""
    out, inside = [], False
    for n, line in enumerate(text.splitlines(), 1):
        m = re.match(r"^\s*(```+|~~~+)(.*)$", line)
        if m:
            if not inside:
                out.append((n, m.group(2).strip()))
            inside = not inside
    return out


def test_model_md_has_no_ascii_equation_blocks(model_text: str) -> None:
    """Every displayed equation is LaTeX (``$$ ... $$``): no plain or ``text`` code block is left,
    which is how the equations were written before they were typeset."""
    plain = [(n, info) for n, info in _fences(model_text) if info in ("", "text")]
    assert not plain, f"ASCII code blocks in docs/model.md at lines {[n for n, _ in plain]}"
    assert model_text.count("\n$$") >= 2 * 50, "model.md has lost its display equations"


def test_every_numbered_section_has_its_label(model_text: str, labels: tuple[set[str], set[str]]) -> None:
    """Each heading ``### (x.y)`` has the label ``eq-x-y`` (on an equation of its section, or on
    the heading where the section writes its maths in the prose), and no label is defined twice
    or without a heading."""
    math, sections = labels
    assert not math & sections
    headings = re.findall(r"^### \((\d+)\.(\d+)\)", model_text, flags=re.M)
    assert len(headings) >= 50
    wanted = {modeleq.label_name(a, b) for a, b in headings}
    assert math | sections == wanted
    defined = re.findall(r"^\s*\$\$ \((eq-[\d-]+)\)|^\((eq-[\d-]+)\)=", model_text, flags=re.M)
    names = [a or b for a, b in defined]
    assert len(names) == len(set(names))
    # a label sits in its own section: the nearest heading above it has its number
    current = None
    for line in model_text.splitlines():
        h = re.match(r"^### \((\d+)\.(\d+)\)", line)
        if h:
            current = modeleq.label_name(*h.groups())
        eqm = re.match(r"^\s*\$\$ \((eq-[\d-]+)\)", line)
        if eqm:
            assert eqm.group(1) == current


def _cited_labels() -> dict[str, list[str]]:
    """Every label the source cites as ``docs/model.md (x.y)`` -> the files citing it."""
    cited: dict[str, list[str]] = {}
    for path in sorted((ROOT / "src").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for m in modeleq.CITATION.finditer(text):
            for a, b in modeleq.LABEL.findall(m.group("labels")):
                cited.setdefault(modeleq.label_name(a, b), []).append(str(path.relative_to(ROOT)))
    return cited


def test_every_label_cited_in_src_exists(labels: tuple[set[str], set[str]]) -> None:
    math, sections = labels
    cited = _cited_labels()
    assert len(cited) >= 40, "the citation pattern no longer finds the code's citations"
    missing = {name: files[:3] for name, files in cited.items() if name not in math | sections}
    assert not missing, f"cited in src/ but not labelled in docs/model.md: {missing}"


def test_citations_become_links() -> None:
    """The docstring rewrite: equations by ``:eq:``, section targets by ``:ref:``, ranges and lists
    label by label, bare labels in a paragraph that cites model.md, the wording kept; literals,
    unknown labels and the bare labels of other paragraphs left alone."""
    math, sections = {"eq-1-1", "eq-1-3", "eq-4-2", "eq-4-3"}, {"eq-5-1"}
    text = (
        "Tokens (docs/model.md (1.1)-(1.3)); errors ``docs/model.md`` (4.2), (4.3);\n"
        "branches, docs/model.md\n    (5.1). Not ``docs/model.md (1.1)``; docs/model.md (9.9).\n"
        "The test error (4.2), a ratio (1.5), ``(4.3)``.\n"
        "\n"
        "Another paragraph: the test error (4.2)."
    )
    out, missing = modeleq.link_citations(text, math, sections)
    assert out == (
        "Tokens (docs/model.md :eq:`eq-1-1`-:eq:`eq-1-3`); errors ``docs/model.md`` :eq:`eq-4-2`, "
        ":eq:`eq-4-3`;\nbranches, docs/model.md\n    :ref:`(5.1) <eq-5-1>`. Not ``docs/model.md (1.1)``; "
        "docs/model.md (9.9).\n"
        "The test error :eq:`eq-4-2`, a ratio (1.5), ``(4.3)``.\n"
        "\n"
        "Another paragraph: the test error (4.2)."
    )
    assert missing == ["(9.9)"]
