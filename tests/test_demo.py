"""The demo end to end with stand-in physics: files, stored points, the
report embeds every figure; reruns compute nothing. (The report in headless Chromium:
tests/test_report.py.)"""

import dataclasses
import json
import re
import sys

import pandas as pd
import pytest

from attnphase.cli import main
from attnphase.report.demo import DemoSettings
from attnphase.sweeps import ResultStore
from attnphase.sweeps.kinds import point_solver_settings
from test_phase import fake_physics  # noqa: F401  (fixture)

ARGS = ["--workers", "1", "--solver", "order=8", "--sim-alpha", "0.5,1.5",
        "--theory-alpha", "0.2:2:10",
        "--phase-omega", "0:0.4:3", "--d", "20", "--seeds", "2"]


def test_demo_writes_figures_report_and_store(tmp_path, capsys, fake_physics):  # noqa: F811
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), *ARGS]) == 0
    stdout = capsys.readouterr().out
    assert "open" in stdout and "report.html" in stdout
    for name in ("curves.png", "curves.pdf", "curves.csv", "phase_diagram.png",
                 "phase_diagram.pdf", "phase_lines.csv", "params.json", "report.html",
                 "results.sqlite"):
        assert (out / name).stat().st_size > 0, name
    with ResultStore(out / "results.sqlite") as st:
        # 2 alphas x 2 starts x 2 seeds; omega = 0.3 plus 3 phase omegas (0.2 not among them)
        assert st.counts() == {("simulation", "ok"): 8, ("transition", "ok"): 4,
                               ("curve", "ok"): 2}
    curves = pd.read_csv(out / "curves.csv")
    assert set(curves.branch) == {"semantic", "positional"}
    sim = curves[curves.source.str.startswith("simulation")]
    assert len(sim) == 4 and sorted(set(sim.alpha)) == [0.5, 1.5]
    html = (out / "report.html").read_text()
    assert len(re.findall(r'<img src="data:image/png;base64,', html)) == 2
    assert "attnphase phase-diagram --omega 0:0.4:3" in html and "--solver order=8" in html
    with ResultStore(out / "results.sqlite") as st:
        tr = [json.loads(r.params) for r in st.records("transition")]
    # (the demo's preset is the transition kind's: its settings are not repeated in the key)
    assert all(not any(k.startswith("solver_") for k in p) for p in tr)
    assert all(point_solver_settings("transition", p).order == 8 for p in tr)
    assert "--only curves" in html and "attnphase 0" not in html.split("<h1>")[0]
    # rerun: nothing computed again
    assert main(["demo", "--out", str(out), *ARGS]) == 0
    assert "0 to compute" in capsys.readouterr().err


def test_demo_only_one_part(tmp_path, fake_physics):  # noqa: F811
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--only", "phase", "--quiet", *ARGS]) == 0
    assert (out / "phase_diagram.png").exists() and not (out / "curves.png").exists()


def test_demo_models_add_their_curves_to_the_report(tmp_path, fake_physics):  # noqa: F811
    """``--models mixture,cross``: each model's curves, simulations and transition are stored with
    its own parameters and shown as a further figure with its command."""
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--only", "curves", "--models", "mixture,cross", "--quiet",
                 *ARGS]) == 0
    for stem in ("curves", "curves_mixture", "curves_cross"):
        for ext in ("png", "pdf", "csv"):
            assert (out / f"{stem}.{ext}").stat().st_size > 0, f"{stem}.{ext}"
    with ResultStore(out / "results.sqlite") as st:
        params = [json.loads(r.params) for kind in ("curve", "transition", "simulation")
                  for r in st.records(kind)]
    mixture = [p for p in params if p.get("mixture") == 2]
    cross = [p for p in params if p["variant"] == "cross"]
    plain = [p for p in params if "mixture" not in p and p["variant"] == "tied"]
    # per model: 2 branches, 1 transition, 2 alphas x 2 starts x 2 seeds
    assert len(mixture) == len(cross) == len(plain) == 11
    assert all(p["mixture_sep"] == 1.0 and p["mixture_align"] == [[0.5]] for p in mixture)
    html = (out / "report.html").read_text()
    assert len(re.findall(r'<img src="data:image/png;base64,', html)) == 3
    assert "--models mixture" in html and "--models cross" in html


@pytest.mark.parametrize("kwargs, msg", [({"d": 1}, "--d"), ({"seeds": 0}, "--seeds"),
                                         ({"sim_alpha": "0,1"}, "> 0"),
                                         ({"momentum": 1.0}, "--momentum"),
                                         ({"parts": ("nope",)}, "unknown demo part"),
                                         ({"models": ("nope",)}, "unknown demo model")])
def test_demo_settings_validation(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        DemoSettings(**kwargs)


def test_demo_without_simulator_says_so(tmp_path, capsys, monkeypatch, fake_physics):  # noqa: F811
    monkeypatch.setitem(sys.modules, "attnphase.sim", None)  # import fails
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--quiet", *ARGS]) == 0
    with ResultStore(out / "results.sqlite") as st:
        errs = [r.error for r in st.records("simulation")]
    assert len(errs) == 8 and all("simulator" in e for e in errs)


def test_line_ends_say_why_each_line_stops():
    """The phase diagram's caption explains each missing point from what the transitions
    recorded: a failure, a note on that line, or a spinodal whose branch was not seen to end."""
    from attnphase.report.demo import line_ends
    from attnphase.sweeps.phase import PhaseLines

    none4 = (None,) * 4
    lines = PhaseLines(values=(0.0, 0.1, 0.2, 0.3), alpha_c=(0.6, 0.7, 0.8, None),
                       alpha_l=(0.7, 0.8, None, None),
                       spinodals={"semantic": (0.5, 0.5, 0.6, None),
                                  "positional": (0.9, None, None, None)},
                       eps_g_lin=none4, errors=(None, None, None, "RuntimeError: boom"))
    notes = {0.2: ("the global minimum does not beat the linear baseline on the grid",
                   "alpha_c and alpha_l from points refined on 4 x qmc rules of order 10")}
    said = line_ends(lines, notes, grid=(0.2, 2.4))
    assert said == [
        "alpha_c: found at omega = 0 to 0.2; missing at omega = 0.3: the transition failed "
        "(RuntimeError: boom).",
        "alpha_l: found at omega = 0, 0.1; missing at omega = 0.2: the global minimum does not "
        "beat the linear baseline on the grid; missing at omega = 0.3: the transition failed "
        "(RuntimeError: boom).",
        "The semantic spinodal: found at omega = 0 to 0.2; missing at omega = 0.3: the transition "
        "failed (RuntimeError: boom).",
        "The positional spinodal: found at omega = 0; missing at omega = 0.1, 0.2: the positional "
        "branch exists on the whole alpha grid searched (up to alpha = 2.4): its spinodal lies "
        "beyond it; missing at omega = 0.3: the transition failed (RuntimeError: boom).",
    ]
    full = dataclasses.replace(lines, alpha_c=(0.6, 0.7, 0.8, 0.9), errors=none4,
                               spinodals={"semantic": (0.5,) * 4, "positional": none4})
    said = line_ends(full, {}, grid=(0.2, 2.4))
    assert said[0] == "alpha_c is found at every omega."
    assert said[1].endswith("missing at omega = 0.2, 0.3: the transition records no reason.")
