"""The report as a static, offline HTML page: Jinja2 templates (``templates/``) and static assets
(``static/``: the page's CSS and JS, and the vendored KaTeX with its fonts).

``render(report) -> str`` fills ``templates/page.html.j2``; ``copy_static(out)`` puts ``static/``
beside the page (``out/static/``), which the page links relatively, so the folder opens from disk
with no server and no network. The page's script (``static/audit.js``) renders the formulas with
KaTeX, runs search, filters and collapsing, and checks the page: it marks ``<body
data-audit-ready="ok">`` only when it ran without an error, every item section has a status chip,
every claim row a verdict, every formula rendered, no id repeats and every ``#`` link has its
target (``tests/audit/test_audit_browser.py`` reads it in headless Chromium).
"""
from __future__ import annotations

import json
import shutil
from functools import lru_cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape

from . import view
from .svg import COLOURS, graph_svg

__all__ = ["render", "chip", "copy_static", "STATIC", "TEMPLATES"]

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"

LABEL = {"fully-checked": "fully checked", "checked": "checked", "unchecked": "unchecked", "stale": "stale",
         "failed": "failed", "assumed": "assumed"}
VERDICT_COLOUR = {"confirmed": "checked", "off": "failed", "citation": "assumed", "not-checkable": "unchecked",
                  "error": "failed"}
STATE_COLOUR = {"ok": "checked", "failed": "failed", "stale": "stale", "missing": "unchecked"}


def chip(status: str, *, attr: str = "status", text: str | None = None) -> Markup:
    """A coloured status chip carrying ``data-<attr>="<status>"`` (the page's self-check looks for it).
    An unknown status gets the 'unchecked' colours and its own name as the label."""
    colour = status if attr == "status" else (VERDICT_COLOUR.get(status) if attr == "verdict" else STATE_COLOUR.get(status))
    fill, stroke = COLOURS.get(colour or "unchecked", COLOURS["unchecked"])
    fg = "#fff" if colour == "fully-checked" else "#1f2328"
    return Markup(f'<span class="chip" data-{attr}="{escape(status)}" style="background:{fill};border-color:{stroke};'
                  f'color:{fg}">{escape(text or LABEL.get(status, status))}</span>')


def _json(x) -> str:
    return json.dumps(x, indent=1, ensure_ascii=False, default=str)


def _bounds(b: dict) -> str:
    return ", ".join(f"{k} = {v}" for k, v in (b or {}).items()) or "unbounded (no size parameter)"


@lru_cache(maxsize=1)
def _env() -> Environment:
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(["j2", "html"]),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.globals.update(chip=chip, label=LABEL)
    env.filters.update(tojson_pretty=_json, bounds=_bounds)
    return env


def render(report: dict) -> str:
    """The HTML text of the report (it links ``static/`` relatively: see ``copy_static``)."""
    g = report["graph"]
    return _env().get_template("page.html.j2").render(
        report=report, view=view.page(report), graph=Markup(graph_svg(g["nodes"], g["edges"])))


def copy_static(out: Path) -> Path:
    """Copy ``static/`` to ``out/static`` (replacing an older copy); return it."""
    dest = Path(out) / "static"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(STATIC, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest
