"""The dependency graph of the items as an inline SVG (a Lean-blueprint-style picture).

Layered left to right: an item's column is one more than the deepest item it uses, so every edge
points rightwards (used → user). Nodes are coloured by their derived status and link to the item's
section (``#item-<id>``). No external fonts, scripts or styles: the SVG is self-contained.
"""
from __future__ import annotations

from html import escape

__all__ = ["COLOURS", "layers", "graph_svg"]

#: status -> (fill, stroke). Shared with the HTML chips.
COLOURS = {
    "fully-checked": ("#1a7f37", "#0f5323"),
    "checked": ("#9be9a8", "#1a7f37"),
    "unchecked": ("#eaeef2", "#6e7781"),
    "stale": ("#f5d90a", "#9a6700"),
    "failed": ("#ff8182", "#a40e26"),
    "assumed": ("#ddf4ff", "#0969da"),
}
W, H, GAP_X, GAP_Y, PAD = 184, 46, 40, 18, 12


def layers(nodes: list[dict], edges: list[list[str]]) -> dict[str, int]:
    """id -> column: 0 for items that use nothing in the graph, else 1 + the deepest used item
    (a cycle, which the registry should never contain, is cut at the first revisit)."""
    uses: dict[str, list[str]] = {n["id"]: [] for n in nodes}
    for u, v in edges:
        uses[v].append(u)
    col: dict[str, int] = {}

    def depth(i: str, stack: tuple = ()) -> int:
        if i in col:
            return col[i]
        if i in stack:
            return 0
        col[i] = d = 1 + max((depth(u, stack + (i,)) for u in uses[i]), default=-1)
        return d

    for n in nodes:
        depth(n["id"])
    return col


def _label(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def graph_svg(nodes: list[dict], edges: list[list[str]]) -> str:
    """The SVG text for ``nodes`` (dicts with id, title, kind, status) and ``edges`` ([used, user])."""
    if not nodes:
        return '<svg xmlns="http://www.w3.org/2000/svg" width="320" height="40" role="img" aria-label="empty graph">' \
               '<text x="10" y="24" font-size="13">No items registered.</text></svg>'
    col = layers(nodes, edges)
    rows: dict[int, int] = {}
    pos = {}
    for n in nodes:  # registration order within a column
        c = col[n["id"]]
        r = rows.get(c, 0)
        rows[c] = r + 1
        pos[n["id"]] = (PAD + c * (W + GAP_X), PAD + r * (H + GAP_Y))
    width = PAD * 2 + (max(col.values()) + 1) * (W + GAP_X) - GAP_X
    height = PAD * 2 + max(rows.values()) * (H + GAP_Y) - GAP_Y
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="depgraph" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="dependency graph of the items">',
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
           'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#57606a"/></marker></defs>']
    for u, v in edges:
        (x1, y1), (x2, y2) = pos[u], pos[v]
        sx, sy, ex, ey = x1 + W, y1 + H / 2, x2, y2 + H / 2
        mx = (sx + ex) / 2
        out.append(f'<path class="edge" d="M{sx},{sy} C{mx},{sy} {mx},{ey} {ex},{ey}" fill="none" '
                   f'stroke="#57606a" stroke-width="1.2" marker-end="url(#arrow)"/>')
    for n in nodes:
        x, y = pos[n["id"]]
        fill, stroke = COLOURS.get(n["status"], COLOURS["unchecked"])
        dark = n["status"] in ("fully-checked",)
        fg = "#ffffff" if dark else "#1f2328"
        iid, title = escape(n["id"]), escape(n["title"])
        out.append(f'<a href="#item-{iid}" class="node" data-id="{iid}" data-status="{escape(n["status"])}">'
                   f'<title>{iid} — {title} ({escape(n["kind"])}, {escape(n["status"])})</title>'
                   f'<rect x="{x}" y="{y}" width="{W}" height="{H}" rx="8" fill="{fill}" stroke="{stroke}" '
                   f'stroke-width="{2 if n["kind"] == "theorem" else 1.2}"/>'
                   f'<text x="{x + 8}" y="{y + 18}" font-size="12" font-weight="600" fill="{fg}" '
                   f'font-family="sans-serif">{escape(_label(n["id"], 26))}</text>'
                   f'<text x="{x + 8}" y="{y + 35}" font-size="10.5" fill="{fg}" font-family="sans-serif">'
                   f'{escape(_label(n["title"], 31))}</text></a>')
    out.append("</svg>")
    return "".join(out)
