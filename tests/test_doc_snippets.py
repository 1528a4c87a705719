"""Every Python snippet of the README and of docs/ runs as written: the ```python blocks of each
page, in order, in one fresh process (a page's later blocks use the names its earlier ones made),
in an empty folder, as a script (``python file.py``: no ``__main__`` guard, as a reader pastes
them). Marked slow (a page's snippets run real solves, simulations and sweeps: minutes for all);
CI runs them (``.ci/run``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def page_code(path: Path) -> str:
    """The page's Python blocks joined in order."""
    return "\n".join(BLOCK.findall(path.read_text()))


WITH_CODE = [p for p in PAGES if page_code(p).strip()]


def test_the_pages_with_snippets_are_found():
    names = {p.name for p in WITH_CODE}
    assert {"README.md", "library.md", "first-solve.md"} <= names


@pytest.mark.slow
@pytest.mark.parametrize("page", WITH_CODE, ids=[p.name for p in WITH_CODE])
def test_page_snippets_run_as_a_script(page, tmp_path):
    script = tmp_path / f"{page.stem}_snippets.py"
    script.write_text(page_code(page))
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, env=env,
                         timeout=1800)
    assert out.returncode == 0, f"{page.name}: the snippets fail as a script:\n{out.stderr[-3000:]}"
