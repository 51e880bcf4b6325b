"""`dlbs serve`: a read-only web application over one results store.

app.py routes requests to pages (Starlette); data.py reads the store (read-only, through
the store protocol and the columnar reader, cached until the store changes); charts.py draws
inline SVG. Pages are Jinja2 templates with autoescaping; the report page is `dlbs report`'s
own HTML (dlbs/report, the same engine), the history pages `dlbs history`'s tables.
"""

from dlbs.web.app import create_app

__all__ = ["create_app"]
