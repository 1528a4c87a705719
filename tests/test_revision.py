"""The numerical revision: changes with the code behind a component's numbers, not with its
comments or docstrings; the same in every process; computed only when asked for."""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from attnphase import _revision
from attnphase._revision import (
    COMPONENTS,
    function_digest,
    normalized_source,
    numerics_revision,
    source_digest,
)
from attnphase.sweeps import builtin_kinds, get_kind

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "attnphase"

CODE = '''"""Module docstring."""

import math


def f(x):
    """Docstring of f."""
    # a comment
    return math.exp(-x) * 2.0


class C:
    """Docstring of C."""

    def g(self):
        return 1
'''


def test_normalized_source_ignores_comments_docstrings_and_layout():
    same = (CODE.replace('"""Docstring of f."""', '"""Another text, longer."""')
            .replace("# a comment", "# another comment\n    # and one more")
            .replace("math.exp(-x) * 2.0", "math.exp( -x )*2.0   # inline")
            .replace('"""Module docstring."""', "# no docstring at all"))
    assert normalized_source(same) == normalized_source(CODE)
    for changed in (CODE.replace("2.0", "2.5"), CODE.replace("-x", "x"),
                    CODE.replace("return 1", "return 1.0")):
        assert normalized_source(changed) != normalized_source(CODE)
    # a function whose body is only its docstring stays valid code
    assert "pass" in normalized_source('def h():\n    """Only a docstring."""\n')


def test_source_digest_of_a_real_module():
    text = (PKG / "theory" / "saddle.py").read_text()
    base = source_digest({"theory/saddle.py": text})
    assert source_digest({"theory/saddle.py": "# header comment\n" + text}) == base
    lines = text.splitlines(keepends=True)
    # the first statement of the module is its docstring: replacing it changes nothing
    assert lines[0].startswith('"""')
    assert source_digest({"theory/saddle.py": '"""Other."""\n' + text.split('"""', 2)[2]}) == base
    # a file's name counts (a module moved is another module)
    assert source_digest({"theory/other.py": text}) != base
    # any change of code does
    i = next(k for k, ln in enumerate(lines) if ln.strip().startswith("return "))
    edited = "".join(lines[:i] + [lines[i].replace("return ", "return -", 1)] + lines[i + 1:])
    assert source_digest({"theory/saddle.py": edited}) != base
    # a C source counts byte for byte
    c = {"theory/native/kernels.c": "int f(void) { return 1; }\n"}
    assert source_digest(c) != source_digest({"theory/native/kernels.c": "int f(void) { return 2; }\n"})


@pytest.fixture
def package_copy(tmp_path, monkeypatch):
    """A copy of the numerical packages, which :func:`numerics_revision` reads instead of the
    imported ones (its process cache emptied before and after)."""
    src, root = _revision._root(), tmp_path / "attnphase"
    for c in COMPONENTS.values():
        for package in c.packages:
            shutil.copytree(src / package, root / package,
                            ignore=shutil.ignore_patterns("__pycache__"))
    numerics_revision.cache_clear()
    real = {c: numerics_revision(c) for c in COMPONENTS}
    monkeypatch.setattr(_revision, "_root", lambda: root)
    numerics_revision.cache_clear()
    yield root, real
    numerics_revision.cache_clear()


def _all():
    numerics_revision.cache_clear()
    return {c: numerics_revision(c) for c in COMPONENTS}


def test_revision_follows_the_code_of_each_component(package_copy, monkeypatch):
    root, real = package_copy
    base = _all()
    assert base == real  # the same files give the same revision wherever they lie
    assert len(set(base.values())) == len(base)
    assert all(len(v) == _revision.DIGITS and int(v, 16) >= 0 for v in base.values())

    saddle = root / "theory" / "saddle.py"
    text = saddle.read_text()
    saddle.write_text("# a new comment\n" + text.replace('"""', '"""Reworded. ', 1))
    assert _all() == base  # comments and docstrings do not count

    saddle.write_text(text + "\n\ndef _new_helper():\n    return 0.5\n")
    after = _all()
    assert after["theory"] != base["theory"]
    assert {k: after[k] for k in ("spec", "sim", "histogram")} == \
        {k: base[k] for k in ("spec", "sim", "histogram")}
    saddle.write_text(text)
    assert _all() == base

    kernels = root / "theory" / "native" / "kernels.c"
    kernels.write_text(kernels.read_text() + "\n/* one more line */\n")
    assert _all()["theory"] != base["theory"]
    kernels.write_text(kernels.read_text().replace("\n/* one more line */\n", ""))
    assert _all() == base

    problem = root / "spec" / "problem.py"
    original = problem.read_text()
    problem.write_text(original + "\nEXTRA = 1\n")
    after = _all()
    assert after["spec"] != base["spec"] and after["theory"] != base["theory"] \
        and after["sim"] != base["sim"] and after["histogram"] == base["histogram"]
    problem.write_text(original)

    new = root / "sim" / "extra.py"
    new.write_text("X = 1\n")  # a new module of a package counts
    assert _all()["sim"] != base["sim"]
    new.unlink()
    assert _all() == base

    real = _revision.library_version
    monkeypatch.setattr(_revision, "library_version",
                        lambda name: "99.0" if name == "torch" else real(name))
    after = _all()
    assert after["sim"] != base["sim"] and after["histogram"] != base["histogram"]
    assert after["theory"] == base["theory"]


def test_unknown_component():
    with pytest.raises(ValueError, match="unknown component 'nope'"):
        numerics_revision("nope")


def test_kind_revision_follows_its_components_and_compute():
    kinds = builtin_kinds()
    revs = {k: v.revision() for k, v in kinds.items()}
    assert len(set(revs.values())) == len(revs)  # each kind computes differently
    theory = get_kind("theory")
    assert theory.numerics == ("theory",) and get_kind("simulation").numerics == ("sim",)
    other = dataclasses.replace(theory, compute=get_kind("curve").compute)
    assert other.revision() != revs["theory"]
    assert dataclasses.replace(theory, numerics=("theory", "sim")).revision() != revs["theory"]

    def documented(params):
        """A docstring does not count."""
        return {}, {}

    def bare(params):
        return {}, {}

    assert function_digest(documented) != function_digest(bare)  # (the name is part of the code)

    def bare2(params):
        return {}, {1: 2}

    assert function_digest(bare2) != function_digest(bare)


def test_revision_is_the_same_in_every_process_and_lazy():
    """Two processes with different hash seeds agree with this one; importing the package
    (and the sweeps) computes nothing."""
    script = (
        "import json, attnphase, attnphase.sweeps\n"
        "from attnphase._revision import COMPONENTS, numerics_revision, function_digest\n"
        "lazy = numerics_revision.cache_info().currsize == 0 == function_digest.cache_info().currsize\n"
        "from attnphase.sweeps import builtin_kinds\n"
        "print(json.dumps({'lazy': lazy, 'c': {c: numerics_revision(c) for c in COMPONENTS},\n"
        "                  'k': {k: v.revision() for k, v in builtin_kinds().items()}}))\n"
    )
    outs = []
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed,
                   PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           env=env, timeout=120)
        assert r.returncode == 0, r.stderr
        outs.append(json.loads(r.stdout))
    assert outs[0] == outs[1]
    assert outs[0]["lazy"] is True
    numerics_revision.cache_clear()
    assert outs[0]["c"] == {c: numerics_revision(c) for c in COMPONENTS}
    assert outs[0]["k"] == {k: v.revision() for k, v in builtin_kinds().items()}
