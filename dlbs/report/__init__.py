"""Reports: tables, comparisons and charts of results.

Tables (tables.py) of each kind (kinds/: one module per kind, found through a table) are
rendered as text, markdown, CSV, JSON (render.py) or HTML (html.py);
compare.py compares two sets of results; plot.py draws charts.

Which experiments a cell holds is decided by identity.py (what tells experiments apart),
select.py (filters, attempts) and keys.py (the row keys); metrics.py names the values;
baseline.py compares each row with a baseline row (the speedup of --baseline).
"""

from dlbs.report.options import Options
from dlbs.report.render import FORMATS, render
from dlbs.report.tables import REPORT_TYPES, Report, build_report

__all__ = ["FORMATS", "REPORT_TYPES", "Options", "Report", "build_report", "render"]
