"""Measured against formula speed-up of examples/spec_e2e.py, drawn as an SVG from its JSON.

    python examples/plot_spec_e2e.py RESULT.json [--out examples/spec_e2e_speedup.svg]

RESULT.json is the ``--out`` of spec_e2e.py, or any JSON that holds one such result somewhere inside
it (a curated ``benchmarks/*.json``: the first dict whose ``rows`` carry ``k`` and ``formula``). Per
k: the measured speed-up over plain decoding (median; the bar spans the rounds' range when the result
has one) and the page's formula (1 − α^{k+1}) / ((1 − α)(k·c + 1)) at the measured α and c. The SVG is
written by hand (no plotting package needed), so the same command regenerates it on any machine.
"""
from __future__ import annotations

import argparse
import json
from typing import NamedTuple

#: canvas and plot area (px)
W, H, LEFT, RIGHT, TOP, BOTTOM = 640, 400, 64, 24, 48, 56


class Point(NamedTuple):
    k: int
    measured: float
    lo: float
    hi: float
    formula: float


def find_result(doc):
    """The first dict inside ``doc`` (depth first) whose ``rows`` are spec_e2e rows; ValueError if none."""
    stack = [doc]
    while stack:
        x = stack.pop(0)
        if isinstance(x, dict):
            rows = x.get("rows")
            if isinstance(rows, list) and any(isinstance(r, dict) and "formula" in r and "k" in r for r in rows):
                return x
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    raise ValueError("no spec_e2e result in this JSON: expected a dict whose 'rows' hold 'k' and 'formula'")


def points(result) -> list[Point]:
    """The rows with k ≥ 1 as Points (lo = hi = the median for a result timed once)."""
    out = []
    for r in result["rows"]:
        if r.get("k", 0) < 1:
            continue
        m = r["speedup"]
        out.append(Point(r["k"], m, r.get("speedup_lo", m), r.get("speedup_hi", m), r["formula"]))
    if not out:
        raise ValueError("the result has no row with k >= 1")
    return sorted(out)


def svg(result) -> str:
    """The plot as SVG text."""
    pts = points(result)
    ks = [p.k for p in pts]
    top = max(max(p.hi for p in pts), max(p.formula for p in pts), 1.0)
    y_max = (int(top * 2) + 1) / 2                                   # next half above the highest value
    k_lo, k_hi = min(ks) - 0.5, max(ks) + 0.5

    def x(k):
        return LEFT + (k - k_lo) / (k_hi - k_lo) * (W - LEFT - RIGHT)

    def y(v):
        return TOP + (1 - v / y_max) * (H - TOP - BOTTOM)
    e = []
    e.append(f'<rect x="{LEFT}" y="{TOP}" width="{W - LEFT - RIGHT}" height="{H - TOP - BOTTOM}" fill="none" '
             'stroke="#444"/>')
    step = 0.5 if y_max <= 4 else 1.0
    v = 0.0
    while v <= y_max + 1e-9:
        e.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>')
        e.append(f'<text x="{LEFT - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.1f}</text>')
        v += step
    e.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y(1):.1f}" y2="{y(1):.1f}" stroke="#888" '
             'stroke-dasharray="4 3"/>')
    for k in ks:
        e.append(f'<text x="{x(k):.1f}" y="{H - BOTTOM + 18}" text-anchor="middle">{k}</text>')
    e.append(f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 14}" text-anchor="middle">k (drafted tokens per cycle)'
             '</text>')
    e.append(f'<text x="16" y="{(TOP + H - BOTTOM) / 2}" text-anchor="middle" '
             f'transform="rotate(-90 16 {(TOP + H - BOTTOM) / 2})">speed-up over plain decoding</text>')
    line = " ".join(f"{x(p.k):.1f},{y(p.formula):.1f}" for p in pts)
    e.append(f'<polyline points="{line}" fill="none" stroke="#1f77b4" stroke-width="2"/>')
    for p in pts:
        e.append(f'<circle cx="{x(p.k):.1f}" cy="{y(p.formula):.1f}" r="3" fill="#1f77b4"/>')
        if p.hi > p.lo:
            e.append(f'<line x1="{x(p.k):.1f}" x2="{x(p.k):.1f}" y1="{y(p.lo):.1f}" y2="{y(p.hi):.1f}" '
                     'stroke="#d62728"/>')
        e.append(f'<rect x="{x(p.k) - 4:.1f}" y="{y(p.measured) - 4:.1f}" width="8" height="8" fill="#d62728"/>')
    c = result.get("c")
    reps = result.get("repeats", 1)
    dtype = str(result.get("dtype", "")).replace("torch.", "")
    title = (f"speculation, batch {result.get('B', '?')}, {dtype}: measured (median of {reps} "
             f"round{'s' if reps != 1 else ''}, bar: range) vs formula"
             + (f", c = {c:.3f}" if isinstance(c, (int, float)) else ""))
    e.append(f'<text x="{W / 2}" y="22" text-anchor="middle" font-weight="bold">{_escape(title)}</text>')
    lx, ly = LEFT + 12, TOP + 16
    e.append(f'<rect x="{lx}" y="{ly - 8}" width="8" height="8" fill="#d62728"/>')
    e.append(f'<text x="{lx + 14}" y="{ly}">measured</text>')
    e.append(f'<line x1="{lx - 2}" x2="{lx + 10}" y1="{ly + 12}" y2="{ly + 12}" stroke="#1f77b4" stroke-width="2"/>')
    e.append(f'<text x="{lx + 14}" y="{ly + 16}">(1 − α^(k+1)) / ((1 − α)(kc + 1))</text>')
    body = "\n".join(e)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
            f'font-family="sans-serif" font-size="12">\n<rect width="{W}" height="{H}" fill="white"/>\n{body}\n</svg>\n')


def _escape(t: str) -> str:
    return t.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("result", help="spec_e2e.py's JSON, or a curated JSON that holds it")
    ap.add_argument("--out", default="examples/spec_e2e_speedup.svg")
    a = ap.parse_args(argv)
    with open(a.result) as f:
        result = find_result(json.load(f))
    text = svg(result)
    with open(a.out, "w") as f:
        f.write(text)
    print(f"wrote {a.out}: " + ", ".join(f"k={p.k} {p.measured:.2f} vs {p.formula:.2f}" for p in points(result)))


if __name__ == "__main__":
    main()
