"""The report as Markdown, for reviews: the same content as the HTML page, as tables.

``render(report, graph_file="graph.svg") -> str``; the dependency graph is referenced as an image
file written beside it.
"""
from __future__ import annotations

import json

__all__ = ["render"]


def _cell(x) -> str:
    return str(x if x not in (None, "") else "—").replace("|", "\\|").replace("\n", " ")


def _bounds(b: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in b.items()) or "none"


def _obligations(obs: list[dict]) -> list[str]:
    if not obs:
        return []
    lines = ["| obligation | evidence | role, scope | result | solvers | bounds | s | controls (planted bug → result) | reproduce |",
             "|---|---|---|---|---|---|---|---|---|"]
    for o in obs:
        ctl = "; ".join(f"{c['bug']} → {c['result']}{' (NOT ok)' if not c['ok'] else ''}" for c in o["controls"]) \
            or "**none**"
        ver = f" {o['solver_version']}" if o.get("solver_version") else ""
        res = o["result"] + (" (stale)" if o["stale"] else "") + (" (cached)" if o["cached"] else "") + \
            (" (from the result cache)" if o.get("evidence_from") == "cache" else "")
        sv = " · ".join(f"{e['name']} {e['status']}" for e in o.get("solvers") or []) or (o["solver"] + ver)
        scope = o.get("scope", "bounded") + (f" ({o['why_unbounded']})" if o.get("why_unbounded") else "")
        lines.append(f"| {_cell(o['id'])} | {o['state']} | {_cell(o.get('role', 'proof') + ', ' + scope)} | {_cell(res)} | "
                     f"{_cell(sv + (' — ' + o['trust'] if o.get('trust') not in (None, '—') else ''))} | "
                     f"{_cell(_bounds(o['bounds']))} | {_cell(o['seconds'])} | {_cell(ctl)} | `{o['command']}` |")
    for o in obs:
        if o["counterexample"] not in (None, {}, []):
            lines.append(f"\nCounterexample of `{o['id']}`: `{json.dumps(o['counterexample'], ensure_ascii=False, default=str)}`")
    return lines


def _solvers_line(run: dict | None) -> str:
    x = (run or {}).get("solvers")
    if not run or not x:
        return "- second solver: no record"
    if not run.get("cross_check"):
        return (f"- second solver: not run (`flashproof prove --cross-check`, default of `--deep`): all "
                f"{x['z3_records']} records with z3 queries rest on z3 alone")
    return (f"- second solver (cvc5; Bitwuzla for floating point): {x['two_solvers']}/{x['z3_records']} records "
            f"with z3 queries agree on every query ({100 * x['agreement_rate']:.1f} %)"
            + (f"; obligations alone {x['obligations_two_solvers']}/{x['z3_obligations']}" if x.get("z3_obligations") else "")
            + f", {x['disagreements']} disagreements, controls refuted by both "
            f"{x['controls_refuted_by_both']}/{x['z3_controls']}")


def _scope_line(it: dict) -> str:
    """One line: the item's derived scope (and what bounds it) and its solver trust tier."""
    if it["kind"] == "assumption" or it.get("scope") in (None, "—"):
        return "Scope: —."
    if it["scope"] == "unbounded":
        sc = "every size (every proof obligation is unbounded)"
    else:
        sc = f"bounded ({it.get('scope_text') or 'bounded instances'}; by {', '.join(it['bounded_by'])})"
    via = it.get("bounded_via_uses") or []
    return (f"Scope: {sc}" + (f"; through the items it uses also bounded by {', '.join(via)}" if via else "")
            + f". Solvers: {it.get('trust', '—')}.")


def render(report: dict, graph_file: str = "graph.svg") -> str:
    p, s, run = report["provenance"], report["summary"], report["prove_run"]
    out = ["# flashproof audit trail", "",
           f"- report generated: {p.get('date')} at commit `{p.get('commit')}` on {p.get('machine')}",
           f"- Python {p.get('python')}, z3 {p.get('z3')}, sympy {p.get('sympy')}",
           _solvers_line(run),
           (f"- proof run: {run.get('generated')}, `{run.get('command')}`, {run.get('total_seconds')} s, "
            f"{'OK' if run.get('ok') else 'NOT OK'}" if run else f"- proof run: none ({p.get('trail', 'out/audit.json')} missing)"),
           "- items: " + ", ".join(f"{k} {v}" for k, v in s["items"].items()),
           f"- seed claims ({s['claims']}): " + ", ".join(f"{k} {v}" for k, v in s["ledger"].items()), ""]
    if report["problems"]:
        out += ["## Problems", ""] + [f"- {x}" for x in report["problems"]] + [""]
    out += ["## Dependency graph", "", f"![dependency graph]({graph_file})", ""]
    for sec in report["sections"]:
        if not sec["items"]:
            continue
        out += [f"## {sec['title']}", ""]
        for it in sec["items"]:
            out += [f"### {it['title']} — **{it.get('chip_text') or it['status']}**", "",
                    f"`{it['id']}` · {it['kind']}" + (f" · source {it['source']}" if it["source"] else "")
                    + (f" · provenance: {', '.join(it['provenance'])}" if it["provenance"] else ""), "",
                    "> " + it["statement"].replace("\n", "\n> "), "",
                    f"Uses: {', '.join(it['uses']) or '—'}. Assumptions: {', '.join(it['assumptions']) or 'none'}.",
                    "", _scope_line(it), ""]
            out += _obligations(it["obligations"]) + [""]
    out += ["## Claims ledger", "",
            "| claim | source | figures: stated → recomputed | verdict | make prove |", "|---|---|---|---|---|"]
    for r in report["ledger"]:
        figs = "; ".join(f"{f['label']}: {f['stated']} → {f['recomputed']} {f['unit']}".strip() for f in r["figures"])
        verdict = r["verdict_text"] if r["verdict"] in ("confirmed", "off", "error") else r["verdict"]
        if r["expect"] == "fails" and r["verdict"] == "off":
            verdict = "erratum: " + verdict
        ob = r["obligation"]
        extra = " ".join(x for x in (r["note"], ("Illustration: " + r["illustration"]) if r["illustration"] else "") if x)
        out.append(f"| **{_cell(r['topic'])}** ({r['id']}): {_cell(r['claim'])} {_cell(extra) if extra else ''} | "
                   f"{r['source'][:3]} | {_cell(figs)} | {_cell(verdict)} | "
                   f"{ob['state'] if ob else 'not part of the exit status'} |")
    return "\n".join(out) + "\n"
