"""Jinja2 templates shipped with the package (``report.html.j2``: the audit's ``report.html``)."""
