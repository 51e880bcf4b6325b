"""Reports: tables computed from experiments (tables.py), rendered (render.py)."""

from dlbs.report.render import FORMATS, render
from dlbs.report.tables import REPORT_TYPES, Report, build_report

__all__ = ["FORMATS", "REPORT_TYPES", "Report", "build_report", "render"]
