"""HTML report: self-contained, and opens in real headless Chromium with
every figure loaded and no script or resource error; the demo's report carries its simulation
points with standard errors and lists only the parameters that differ from their defaults; every
plot function draws a branch in its one colour (plots.style.BRANCH_COLORS)."""

import base64
import json
import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_hex

from attnphase.plots.style import BRANCH_COLORS, new_figure
from attnphase.report import ReportFigure, ReportTable, figure_png, render_report, write_report
from test_phase import fake_physics  # noqa: F401  (fixture)

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)

#: Collects script/resource errors and, once loaded, the natural size of every <img>.
CHECK = """<script>
window.__errs = [];
window.addEventListener('error', e => {
  window.__errs.push(e.message || ((e.target && e.target.tagName) + ' failed to load'));
}, true);
window.addEventListener('load', () => {
  const imgs = Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.naturalHeight]);
  const tables = {};
  document.querySelectorAll('table[data-table]').forEach(t => {
    tables[t.dataset.table] = Array.from(t.querySelectorAll('tbody tr')).map(tr => {
      const row = {};
      tr.querySelectorAll('td[data-col]').forEach(td => { row[td.dataset.col] = JSON.parse(td.dataset.value); });
      return row;
    });
  });
  const changed = Array.from(document.querySelectorAll('#changed-params tr[data-param]'))
    .map(tr => [tr.dataset.param, ...Array.from(tr.querySelectorAll('td')).map(td => td.textContent)]);
  const rec = document.getElementById('full-record-json');
  const p = document.createElement('pre');
  p.id = '__check';
  p.textContent = JSON.stringify({imgs: imgs, errors: window.__errs, tables: tables, changed: changed,
                                  record: rec ? JSON.parse(rec.textContent) : null,
                                  recordFolded: rec ? rec.closest('details') !== null : null});
  document.body.appendChild(p);
});
</script>"""


def _fake_figures(n=2):
    figs = []
    for i in range(n):
        fig = new_figure(3, 2, dpi=60)
        ax = fig.add_subplot()
        ax.plot([0, 1, 2], [0, i + 1, 0])
        figs.append(ReportFigure(f"figure {i}", figure_png(fig, dpi=60),
                                 caption=f"caption {i} <b>escaped</b>",
                                 command=f"attnphase demo --out out{i}",
                                 files=(f"f{i}.png", f"f{i}.pdf"), params={"omega": 0.3}))
    return figs


def test_report_is_self_contained(tmp_path):
    text = render_report("Demo & test", _fake_figures(), {"sigma": 0.5, "A": [[0.6, 0.4]]},
                         "9.9.9", intro="intro", notes=["a note"])
    assert text.startswith("<!DOCTYPE html>")
    assert "attnphase 9.9.9" in text and "Demo &amp; test" in text
    assert "&lt;b&gt;escaped&lt;/b&gt;" in text  # user text is escaped
    assert text.count("attnphase demo --out out") == 2
    srcs = re.findall(r'src="([^"]+)"', text)
    assert len(srcs) == 2 and all(s.startswith("data:image/png;base64,") for s in srcs)
    png = base64.b64decode(srcs[0].split(",", 1)[1])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert "http://" not in text and "https://" not in text and "<script" not in text
    with pytest.raises(ValueError, match="at least one figure"):
        render_report("x", [], {}, "1")


def _chromium(args, tmp_path, timeout=90):
    prof = tmp_path / "profile"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", f"--user-data-dir={prof}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def dom_check(html_path, tmp_path):
    """Open ``html_path`` (plus the check script) in Chromium; the check's JSON."""
    probe = tmp_path / "probe.html"
    probe.write_text(html_path.read_text(encoding="utf-8").replace("<head>", "<head>" + CHECK, 1),
                     encoding="utf-8")
    r = _chromium(["--dump-dom", probe.as_uri()], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    m = re.search(r'<pre id="__check">(.*?)</pre>', r.stdout, re.S)
    assert m, "the page did not finish loading"
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_report_opens_in_headless_chromium(tmp_path):
    path = write_report(tmp_path / "report.html", "Report", _fake_figures(3), {"d": 100}, "1.0")
    check = dom_check(path, tmp_path)
    assert check["errors"] == []
    assert len(check["imgs"]) == 3
    assert all(c and w == 180 and h == 120 for c, w, h in check["imgs"])  # 3x2 in at 60 dpi
    shot = tmp_path / "shot.png"
    r = _chromium([f"--screenshot={shot}", "--window-size=1000,900", path.as_uri()], tmp_path)
    assert r.returncode == 0 and shot.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_chromium_check_detects_a_broken_figure(tmp_path):
    """The browser check itself can fail: a corrupt image is reported with width 0."""
    figs = _fake_figures(1) + [ReportFigure("broken", b"not a png")]
    path = write_report(tmp_path / "bad.html", "Bad", figs, {}, "1.0")
    check = dom_check(path, tmp_path)
    assert [w for _, w, _ in check["imgs"]] == [180, 0]
    assert check["errors"]


def test_parameters_listed_only_where_they_differ_from_their_defaults():
    params = {"omega": 0.2, "sigma": 0.5, "A": [[0.6, 0.4]], "demo.d": 50, "extra": "x"}
    defaults = {"omega": 0.3, "sigma": 0.5, "A": [[0.6, 0.4]], "demo.d": 200}
    text = render_report("R", _fake_figures(1), params, "1", defaults=defaults,
                         record_file="params.json")
    rows = re.findall(r'<tr data-param="([^"]+)">', text)
    assert rows == ["omega", "demo.d", "extra"]  # a key without a default counts as changed
    record = re.search(r'<pre id="full-record-json">(.*?)</pre>', text, re.S).group(1)
    assert json.loads(record.replace("&quot;", '"')) == params
    assert '<a href="params.json">' in text
    same = render_report("R", _fake_figures(1), {"omega": 0.3}, "1", defaults={"omega": 0.3})
    assert "Every parameter is at its default" in same and "data-param" not in same


def test_report_table_cells_carry_their_values():
    t = ReportTable("pts", "points", ("start", "alpha", "se"),
                    (("semantic", 0.5, 0.01), ("positional", 1.5, float("nan"))))
    fig = ReportFigure("f", _fake_figures(1)[0].png, table=t)
    text = render_report("R", [fig], {}, "1")
    cells = re.findall(r'data-col="(\w+)" data-value="([^"]*)"', text)
    assert cells[:3] == [("start", "&quot;semantic&quot;"), ("alpha", "0.5"), ("se", "0.01")]
    assert cells[-1] == ("se", "null")  # a non-finite number is missing, not NaN
    with pytest.raises(ValueError, match="2 cells for 3 columns"):
        ReportTable("bad", "bad", ("a", "b", "c"), (("x", 1),))


def _line_colours(fig):
    """``{label: colour}`` of every legend entry of ``fig`` (lines and error bars)."""
    out = {}
    for ax in fig.axes:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            line = h[0] if isinstance(h, tuple) or hasattr(h, "lines") else h
            out[label] = to_hex(line.get_color())
    return out


def _assert_branch_colours(colours, expect):
    """Each label naming one branch (or the start aiming at it) has that branch's colour."""
    checked = 0
    for label, colour in colours.items():
        named = [b for b in ("semantic", "positional", "random", "mixed") if b in label]
        if len(named) == 1:
            assert colour == BRANCH_COLORS[named[0]], (label, colour)
            checked += 1
    assert checked >= expect, colours


def test_every_plot_function_draws_a_branch_in_its_one_colour():
    from attnphase.plots.compare import compare_figure
    from attnphase.plots.curves import curves_figure
    from attnphase.plots.phase import plot_curves_with_points
    from attnphase.spec.problem import ModelSpec

    a = [0.5, 1.0, 1.5]
    th = {b: {"alpha": a, "train_loss": [3e-3, 2e-3, 1e-3], "test_error": [4e-3, 3e-3, 2e-3],
              "theta": [0.1, 0.3, 0.5], "m": [0.2, 0.2, 0.2]} for b in ("semantic", "positional")}
    pts = {b: {**c, "test_error_se": [1e-4] * 3} for b, c in th.items()}
    _assert_branch_colours(_line_colours(plot_curves_with_points(th, pts)), 4)
    rows = [dict(source="theory", kind=b, alpha=x, seed=0, m=0.2, theta=0.4, q=0.3, train_loss=1e-3,
                 test_error=2e-3, linear_test_error=2e-3, exists=True, branch=b, d=None)
            for b in ("semantic", "positional", "linear") for x in a]
    rows += [dict(source="simulation", kind=b, alpha=x, seed=s, m=0.2, theta=0.4, q=0.3,
                  train_loss=1e-3 + s * 1e-5, test_error=2e-3, linear_test_error=2e-3, exists=True,
                  branch=b, d=20) for b in ("semantic", "positional", "random") for x in a for s in (0, 1)]
    _assert_branch_colours(_line_colours(compare_figure(pd.DataFrame(rows), ModelSpec(), 20)), 9)
    table = pd.DataFrame({"alpha": a, "linear_test_error": 2e-3,
                          **{f"{b}_{k}": np.linspace(0.1, 0.3, 3) for b in ("semantic", "positional")
                             for k in ("theta", "m", "q", "train_loss", "test_error")}})
    _assert_branch_colours(_line_colours(curves_figure(table, ModelSpec())), 6)


def test_heat_maps_of_a_branch_difference_use_the_branch_colours():
    """eps(semantic start) - eps(positional start) < 0 (the semantic side lower) is drawn towards
    the semantic red, > 0 towards the positional blue."""
    from attnphase.plots.phase import plot_phase_heatmaps
    from attnphase.sweeps.phase import HeatMaps

    z = np.array([[-1e-3, 1e-3], [-1e-3, 1e-3]])
    fig = plot_phase_heatmaps(HeatMaps((0.1, 0.3), (0.5, 1.5), 20, (0, 1), z, z, np.full((2, 2), 2)))
    mesh = fig.axes[0].collections[0]
    sem, pos = (np.array(mesh.cmap(mesh.norm(v))[:3]) for v in (-1e-3, 1e-3))
    assert sem[0] > sem[2] and pos[2] > pos[0]
    red, blue = (np.array([int(BRANCH_COLORS[b][i:i + 2], 16) for i in (1, 3, 5)]) / 255
                 for b in ("semantic", "positional"))
    assert np.linalg.norm(sem - red) < np.linalg.norm(sem - blue)


def test_curves_with_points_draw_standard_errors_as_bars():
    from matplotlib.container import ErrorbarContainer

    from attnphase.plots.phase import plot_curves_with_points

    pts = {"semantic": {"alpha": [0.5, 1.0], "test_error": [2e-3, 1e-3],
                        "test_error_se": [1e-4, float("nan")]}}
    fig = plot_curves_with_points({}, pts)
    bars = [c for ax in fig.axes for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 1
    (seg,) = bars[0].lines[2]
    lengths = [abs(s[1][1] - s[0][1]) for s in seg.get_segments()]
    np.testing.assert_allclose(lengths, [2e-4, 0.0])  # +- 1 s.e.; none where it is unknown


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_demo_report_shows_error_bars_and_only_changed_parameters(tmp_path, monkeypatch, fake_physics):  # noqa: F811
    """A tiny demo (stand-in physics, 3 seeds, one run of which misses its gradient tolerance)
    opened in Chromium: the simulation points carry the seeds that met the tolerance and finite
    standard errors; the parameter table lists exactly the non-default parameters, with the full
    record folded below it."""
    import sys

    from attnphase.cli import main
    from attnphase.spec.problem import ModelSpec

    sim = sys.modules["attnphase.sim"]
    real = sim.simulate

    def simulate(spec, *, alpha, d, seeds, inits, settings):  # seed 2 stops at the step cap
        res = real(spec, alpha=alpha, d=d, seeds=seeds, inits=inits, settings=settings)
        if seeds[0] == 2:
            (run,) = res.runs
            run.data.update(converged=False, stop="max_steps", train_loss=1.0, test_error=1.0)
        return res

    monkeypatch.setattr(sim, "simulate", simulate)
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--quiet", "--workers", "1", "--solver", "order=9",
                 "--sim-alpha", "0.5,1.5", "--theory-alpha", "0.2:2:4", "--phase-omega", "0,0.3",
                 "--d", "20", "--seeds", "3", "--omega", "0.2"]) == 0
    check = dom_check(out / "report.html", tmp_path)
    assert check["errors"] == [] and all(c and w > 300 for c, w, _ in check["imgs"])
    pts = check["tables"]["simulation"]
    assert {(p["start"], p["alpha"]) for p in pts} == {(s, a) for s in ("semantic", "positional")
                                                      for a in (0.5, 1.5)}
    for p in pts:
        assert p["d"] == 20 and p["runs"] == 3 and p["converged"] == 2
        for k in ("train_loss", "test_error", "theta", "m"):
            assert np.isfinite(p[k]) and np.isfinite(p[f"{k}_se"]) and p[f"{k}_se"] >= 0
        assert p["test_error"] < 0.01  # the run that missed its tolerance is not counted
    assert "8 of 12 runs met it" in (out / "report.html").read_text()  # the caption counts them
    # semantic start: training losses of seeds 0 and 1 differ by 1e-3 -> s.e. 5e-4
    sem = [p for p in pts if p["start"] == "semantic"]
    np.testing.assert_allclose([p["train_loss_se"] for p in sem], 5e-4, rtol=1e-9)
    # only what differs from ModelSpec(), the fast preset and DemoSettings()
    changed = {name: (value, default) for name, value, default in check["changed"]}
    assert set(changed) == {"omega", "solver_order", "demo.omega", "demo.theory_alpha",
                            "demo.sim_alpha", "demo.d", "demo.phase_omega"}
    assert changed["omega"] == ("0.2", "0.3") and changed["solver_order"] == ("9", "8")
    assert changed["demo.d"][0] == "20"
    record = check["record"]
    assert check["recordFolded"] and record["demo.seeds"] == 3 and record["solver_order"] == 9
    assert set(ModelSpec().to_dict()) <= set(record)
    assert json.loads((out / "params.json").read_text()) == record
