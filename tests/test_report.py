"""HTML report: self-contained, and opens in real headless Chromium with
every figure loaded and no script or resource error."""

import base64
import json
import re
import shutil
import subprocess

import pytest

from attnphase.plots.style import new_figure
from attnphase.report import ReportFigure, figure_png, render_report, write_report

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
  const p = document.createElement('pre');
  p.id = '__check';
  p.textContent = JSON.stringify({imgs: imgs, errors: window.__errs});
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
