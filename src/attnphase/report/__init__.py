"""Self-contained HTML reports (figures embedded as base64 PNG) and the demo."""

from attnphase.report.html import ReportFigure, ReportTable, figure_png, render_report, write_report

__all__ = ["ReportFigure", "ReportTable", "figure_png", "render_report", "write_report"]
