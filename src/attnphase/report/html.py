"""A single self-contained HTML report: figures embedded as base64 PNG, parameters,
package version and a one-line command reproducing each figure. No external resources,
no scripts: it opens offline in any browser.

The numbers behind a figure can travel with it as a :class:`ReportTable`, folded under the figure
and readable by a program (each cell's value in ``data-value``). The parameters are shown as the
few that differ from their defaults, with the full record one click away (a folded JSON block).
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
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
table { border-collapse: collapse; font-size: 0.9em; margin: 0.4em 0; }
details { margin: 0.6em 0; } summary { cursor: pointer; color: #333; }
.scroll { overflow-x: auto; }
td, th { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; }
.meta { color: #555; font-size: 0.9em; }
"""


@dataclass(frozen=True)
class ReportTable:
    """Numbers shown folded under a figure (an HTML ``<details>``) and readable by a program: the
    ``<table>`` carries ``data-table=name``, each cell ``data-col`` (its column) and ``data-value``
    (its value as JSON, ``null`` for a missing or non-finite number)."""

    name: str
    summary: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    def __post_init__(self) -> None:
        for r in self.rows:
            if len(r) != len(self.columns):
                raise ValueError(f"table {self.name!r}: a row has {len(r)} cells for "
                                 f"{len(self.columns)} columns")


@dataclass(frozen=True)
class ReportFigure:
    """One figure of a report."""

    title: str
    png: bytes
    caption: str = ""
    command: str = ""
    files: tuple[str, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)
    #: the numbers behind the figure (e.g. simulation means and standard errors)
    table: ReportTable | None = None


def figure_png(fig: Figure, dpi: int = 110) -> bytes:
    """PNG bytes of a Figure."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def _text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def _table(params: Mapping[str, Any]) -> str:
    rows = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td><code>{html.escape(_text(v))}</code></td></tr>"
        for k, v in params.items()
    )
    return f"<table>{rows}</table>"


def _json_value(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _cell(v: Any) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _data_table(t: ReportTable) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in t.columns)
    body = "".join(
        "<tr>" + "".join(
            f'<td data-col="{html.escape(c, quote=True)}" '
            f'data-value="{html.escape(json.dumps(_json_value(v)), quote=True)}">'
            f"{html.escape(_cell(v))}</td>" for c, v in zip(t.columns, row, strict=True)) + "</tr>"
        for row in t.rows)
    return (f'<details><summary>{html.escape(t.summary)}</summary><div class="scroll">'
            f'<table data-table="{html.escape(t.name, quote=True)}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div></details>")


def _changed(params: Mapping[str, Any], defaults: Mapping[str, Any]) -> list[str]:
    """The keys of ``params`` whose value differs from ``defaults`` (a key without a default
    counts as changed)."""
    return [k for k, v in params.items() if k not in defaults or defaults[k] != v]


def _params_section(params: Mapping[str, Any], defaults: Mapping[str, Any] | None,
                    record_file: str | None) -> list[str]:
    """The parameters that differ from their defaults (all of them without ``defaults``) and the
    full record, folded, as JSON."""
    parts = ["<h2>Parameters</h2>"]
    if defaults is None:
        parts.append(_table(params))
    else:
        keys = _changed(params, defaults)
        if keys:
            rows = "".join(
                f'<tr data-param="{html.escape(k, quote=True)}"><th>{html.escape(k)}</th>'
                f"<td><code>{html.escape(_text(params[k]))}</code></td><td><code>"
                f"{html.escape(_text(defaults[k])) if k in defaults else '(none)'}</code></td></tr>"
                for k in keys)
            parts.append("<p>The parameters that differ from their defaults:</p>"
                         '<table id="changed-params"><thead><tr><th>parameter</th><th>value</th>'
                         f"<th>default</th></tr></thead><tbody>{rows}</tbody></table>")
        else:
            parts.append('<p>Every parameter is at its default.</p><table id="changed-params">'
                         "</table>")
    link = (f' (also in <a href="{html.escape(record_file, quote=True)}">'
            f"<code>{html.escape(record_file)}</code></a> beside this page)" if record_file else "")
    parts.append(f'<details id="full-record"><summary>The full record: every parameter{link}'
                 f'</summary><pre id="full-record-json">'
                 f"{html.escape(json.dumps(params, indent=1, default=str))}</pre></details>")
    return parts


def render_report(
    title: str,
    figures: Sequence[ReportFigure],
    params: Mapping[str, Any],
    version: str,
    intro: str = "",
    notes: Sequence[str] = (),
    defaults: Mapping[str, Any] | None = None,
    record_file: str | None = None,
) -> str:
    """The HTML text of a report (see the module docstring).

    ``params``: the full record of the parameters; with ``defaults`` the page lists only those
    that differ from them (a key without a default counts as different), the full record folded
    below; ``record_file``: the name of a file beside the page holding the same record, linked."""
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
        if f.table is not None:
            parts.append(_data_table(f.table))
        parts.append("</section>")
    parts += _params_section(params, defaults, record_file)
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
