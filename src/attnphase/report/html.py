"""A single self-contained HTML report: figures embedded as base64 PNG, parameters,
package version and a one-line command reproducing each figure. No external resources,
no scripts: it opens offline in any browser.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # matplotlib is imported only where a figure is drawn
    from matplotlib.figure import Figure

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1100px;
       margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; } h2 { font-size: 1.2em; margin-top: 2em; }
figure { margin: 1em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { font-size: 0.92em; color: #444; }
pre, code { background: #f5f5f5; font-size: 0.88em; }
pre { padding: 0.6em; overflow-x: auto; white-space: pre-wrap; }
table { border-collapse: collapse; font-size: 0.9em; }
td, th { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; }
.meta { color: #555; font-size: 0.9em; }
"""


@dataclass(frozen=True)
class ReportFigure:
    """One figure of a report."""

    title: str
    png: bytes
    caption: str = ""
    command: str = ""
    files: tuple[str, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)


def figure_png(fig: Figure, dpi: int = 110) -> bytes:
    """PNG bytes of a Figure."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def _table(params: Mapping[str, Any]) -> str:
    rows = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td><code>"
        f"{html.escape(json.dumps(v) if not isinstance(v, str) else v)}</code></td></tr>"
        for k, v in params.items()
    )
    return f"<table>{rows}</table>"


def render_report(
    title: str,
    figures: Sequence[ReportFigure],
    params: Mapping[str, Any],
    version: str,
    intro: str = "",
    notes: Sequence[str] = (),
) -> str:
    """The HTML text of a report (see the module docstring)."""
    if not figures:
        raise ValueError("a report needs at least one figure")
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="meta">attnphase {html.escape(version)} &middot; generated {now}</p>',
    ]
    if intro:
        parts.append(f"<p>{html.escape(intro)}</p>")
    for i, f in enumerate(figures, 1):
        b64 = base64.b64encode(f.png).decode("ascii")
        parts.append(f'<section id="fig{i}"><h2>{i}. {html.escape(f.title)}</h2><figure>')
        parts.append(f'<img src="data:image/png;base64,{b64}" alt="{html.escape(f.title)}">')
        if f.caption:
            parts.append(f"<figcaption>{html.escape(f.caption)}</figcaption>")
        parts.append("</figure>")
        if f.command:
            parts.append("<p>Reproduce with one command:</p>"
                         f"<pre><code>{html.escape(f.command)}</code></pre>")
        if f.files:
            parts.append("<p>Files: " + ", ".join(f"<code>{html.escape(x)}</code>"
                                                  for x in f.files) + "</p>")
        if f.params:
            parts.append(_table(f.params))
        parts.append("</section>")
    parts.append("<h2>Parameters</h2>")
    parts.append(_table(params))
    if notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes)
                     + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_report(path: str | Path, *args: Any, **kwargs: Any) -> Path:
    """Render (:func:`render_report`) and write the report to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_report(*args, **kwargs), encoding="utf-8")
    return path
