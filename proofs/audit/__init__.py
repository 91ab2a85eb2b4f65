"""The audit report: the data model, its Markdown, HTML and SVG renderings, and
``flashproof audit`` (``cli``)."""
