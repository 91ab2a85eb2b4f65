"""The report as one static, offline HTML page (inline CSS, inline SVG, a few lines of inline JS).

``render(report) -> str``. The page's script only checks the page: it marks
``<body data-audit-ready="ok">`` when it ran without an error and every item section carries a
status chip (``data-audit-ready="missing-status:<ids>"`` or ``"error:<message>"`` otherwise), so a
headless browser can tell that the page loaded and rendered (``tests/audit/test_audit_browser.py``).
"""
from __future__ import annotations

import json
from html import escape

from .svg import COLOURS, graph_svg

__all__ = ["render", "chip"]

LABEL = {"fully-checked": "fully checked", "checked": "checked", "unchecked": "unchecked", "stale": "stale",
         "failed": "failed", "assumed": "assumed"}
VERDICT_COLOUR = {"confirmed": "checked", "off": "failed", "citation": "assumed", "not-checkable": "unchecked",
                  "error": "failed"}
STATE_COLOUR = {"ok": "checked", "failed": "failed", "stale": "stale", "missing": "unchecked"}

CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;color:#1f2328;background:#fff}
main{max-width:1180px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:24px;margin:8px 0}h2{font-size:19px;border-bottom:1px solid #d0d7de;padding-bottom:4px;margin-top:32px}
h3{font-size:16px;margin:0 0 6px}code,pre{font:12px/1.4 ui-monospace,Menlo,Consolas,monospace}
pre{white-space:pre-wrap;background:#f6f8fa;border-radius:6px;padding:6px 8px;margin:4px 0}
table{border-collapse:collapse;width:100%;margin:6px 0}th,td{border:1px solid #d0d7de;padding:4px 6px;vertical-align:top;text-align:left}
th{background:#f6f8fa}.item{border:1px solid #d0d7de;border-radius:8px;padding:10px 14px;margin:12px 0}
.chip{display:inline-block;border-radius:10px;padding:1px 9px;font-size:12px;font-weight:600;border:1px solid;white-space:nowrap}
.kind{color:#57606a;font-size:12px;text-transform:uppercase;letter-spacing:.04em;margin-right:6px}
.muted{color:#57606a}.prov{display:inline-block;background:#f6f8fa;border:1px solid #d0d7de;border-radius:4px;padding:0 6px;margin-right:4px;font-size:12px}
.cmd{user-select:all;background:#0d1117;color:#e6edf3;padding:2px 6px;border-radius:4px}
.ob{border-left:3px solid #d0d7de;padding:4px 10px;margin:8px 0}.graph{overflow-x:auto;border:1px solid #d0d7de;border-radius:8px;padding:6px}
.problems{background:#fff8c5;border:1px solid #d4a72c;border-radius:6px;padding:6px 12px}
.legend .chip{margin-right:6px}nav a{margin-right:12px}details summary{cursor:pointer;color:#0969da}
"""

SCRIPT = """
(function(){
  var body=document.body;
  window.addEventListener('error',function(e){body.setAttribute('data-audit-ready','error:'+e.message);});
  try{
    var items=document.querySelectorAll('section.item'),missing=[];
    for(var i=0;i<items.length;i++){
      var c=items[i].querySelector('.chip[data-status]');
      if(!c||!c.getAttribute('data-status')){missing.push(items[i].id);}
    }
    var claims=document.querySelectorAll('tr.claim'),noverdict=[];
    for(var j=0;j<claims.length;j++){if(!claims[j].querySelector('.chip[data-verdict]')){noverdict.push(claims[j].id);}}
    body.setAttribute('data-audit-items',String(items.length));
    body.setAttribute('data-audit-claims',String(claims.length));
    var bad=missing.concat(noverdict);
    body.setAttribute('data-audit-ready',bad.length?'missing-status:'+bad.join(','):'ok');
  }catch(err){body.setAttribute('data-audit-ready','error:'+err);}
})();
"""


def chip(status: str, *, attr: str = "status", text: str | None = None) -> str:
    colour = status if attr == "status" else (VERDICT_COLOUR.get(status) if attr == "verdict" else STATE_COLOUR.get(status))
    fill, stroke = COLOURS.get(colour or "unchecked", COLOURS["unchecked"])
    fg = "#fff" if colour == "fully-checked" else "#1f2328"
    return (f'<span class="chip" data-{attr}="{escape(status)}" style="background:{fill};border-color:{stroke};'
            f'color:{fg}">{escape(text or LABEL.get(status, status))}</span>')


def _json(x) -> str:
    return escape(json.dumps(x, indent=1, ensure_ascii=False, default=str))


def _bounds(b: dict) -> str:
    return ", ".join(f"{k} = {v}" for k, v in b.items()) or "unbounded (no size parameter)"


def _obligation(o: dict) -> str:
    res = o["result"] + (" (cached)" if o["cached"] else "") + \
        (" — from the prover's result cache (same content hash as the current sources)" if o.get("evidence_from") == "cache" else "")
    ver = f" {o['solver_version']}" if o.get("solver_version") else ""
    secs = "—" if o["seconds"] is None else f"{o['seconds']} s"
    parts = [f'<div class="ob" id="ob-{escape(o["id"])}"><b>{escape(o["id"])}</b> '
             f'{chip(o["state"], attr="state", text="evidence: " + o["state"])} '
             f'<span class="muted">{escape(o["title"])}</span>',
             "<table><tr><th>encoding</th><td>" + escape(o["encoding"] or "—") + "</td></tr>",
             f"<tr><th>solver</th><td>{escape(o['solver'] or '—')}{escape(ver)}</td></tr>",
             f"<tr><th>bounds</th><td>{escape(_bounds(o['bounds']))}</td></tr>",
             f"<tr><th>result</th><td>{escape(res)}{' — <b>stale</b>: sources changed since this result' if o['stale'] else ''}"
             f" · {escape(secs)}<br><span class='muted'>{escape(o['detail'] or '')}</span></td></tr>",
             f"<tr><th>assumptions</th><td>{escape(', '.join(o['assumptions']) or 'none')}</td></tr>"]
    if o["counterexample"] not in (None, {}, []):
        parts.append(f"<tr><th>counterexample</th><td><pre>{_json(o['counterexample'])}</pre></td></tr>")
    if o.get("witness") not in (None, {}, []):
        parts.append(f"<tr><th>witness</th><td><details><summary>show</summary><pre>{_json(o['witness'])}</pre></details></td></tr>")
    ctl = []
    for c in o["controls"]:
        cx = f"<details><summary>counterexample</summary><pre>{_json(c['counterexample'])}</pre></details>" \
            if c["counterexample"] not in (None, {}, []) else '<span class="muted">no counterexample</span>'
        ctl.append(f"<li><code>{escape(c['id'])}</code> — {escape(c['bug'] or '')}: <b>{escape(c['result'])}</b> "
                   f"({'ok' if c['ok'] else 'NOT ok'}{', stale' if c['stale'] else ''}) {cx}</li>")
    parts.append("<tr><th>negative controls</th><td>" + (f"<ul>{''.join(ctl)}</ul>" if ctl else
                 "<b>none</b> (a check that cannot fail is not evidence)") + "</td></tr>")
    parts.append(f'<tr><th>reproduce</th><td><code class="cmd">{escape(o["command"])}</code></td></tr></table></div>')
    return "".join(parts)


def _link(i: str) -> str:
    return f'<a href="#item-{escape(i)}">{escape(i)}</a>'


def _item(it: dict) -> str:
    prov = "".join(f'<span class="prov">{escape(p)}</span>' for p in it["provenance"]) or '<span class="muted">—</span>'
    obs = "".join(_obligation(o) for o in it["obligations"]) or \
        ('<p class="muted">Trusted, not checked (listed with every item that rests on it).</p>'
         if it["kind"] == "assumption" else '<p class="muted">No obligation checks this item.</p>')
    return (f'<section class="item" id="item-{escape(it["id"])}" data-item="{escape(it["id"])}">'
            f'<h3><span class="kind">{escape(it["kind"])}</span>{escape(it["title"])} {chip(it["status"], text=it.get("chip_text"))}</h3>'
            f'<div class="muted"><code>{escape(it["id"])}</code>'
            f'{" · source " + escape(it["source"]) if it["source"] else ""}</div>'
            f"<pre>{escape(it['statement'])}</pre>"
            f"<div>Provenance (the page's labels): {prov}</div>"
            f"<div>Uses: {', '.join(_link(u) for u in it['uses']) or '—'} · Used by: "
            f"{', '.join(_link(u) for u in it['used_by']) or '—'}</div>"
            f"<div>Rests on assumptions: {', '.join(_link(a) for a in it['assumptions']) or 'none'}</div>"
            f"{obs}</section>")


def _ledger(rows: list[dict]) -> str:
    out, by_src = [], {}
    for r in rows:
        by_src.setdefault(r["source"], []).append(r)
    for src, rs in by_src.items():
        out.append(f"<h3>{escape(src)}</h3><table><tr><th>claim</th><th>figures: stated → recomputed</th>"
                   "<th>how it is checked</th><th>verdict</th><th>make prove</th></tr>")
        for r in rs:
            figs = "<br>".join(f"{escape(f['label'])}: {escape(f['stated'])} → <b>{escape(f['recomputed'] or '—')}</b> "
                               f"{escape(f['unit'])}" for f in r["figures"]) or "—"
            how = escape(r["method"]) + (f"<br><span class='muted'>{escape(r['detail'])}</span>" if r["detail"] else "")
            if r["illustration"]:
                how += f"<br><i>Illustration (computed): {escape(r['illustration'])}</i>"
            if r["note"]:
                how += f"<br><b>Note:</b> {escape(r['note'])}"
            erratum = r["expect"] == "fails" and r["verdict"] == "off"
            v = chip(r["verdict"], attr="verdict", text="off · erratum" if erratum else None)
            vt = escape(r["verdict_text"]) if r["verdict"] in ("confirmed", "off", "error") else ""
            if erratum:
                vt = "the seed is wrong here, as the ledger expects: " + vt
            ob = r["obligation"]
            pr = chip(ob["state"], attr="state") + f"<br><code>{escape(ob['id'])}</code>" if ob else \
                '<span class="muted">not part of the exit status</span>'
            out.append(f'<tr class="claim" id="claim-{escape(r["id"])}" data-check="{escape(r["check"])}">'
                       f"<td><b>{escape(r['topic'])}</b><br>{escape(r['claim'])}<br><code class='muted'>{escape(r['id'])}</code></td>"
                       f"<td>{figs}</td><td>{how}</td><td>{v}<br><span class='muted'>{vt}</span></td><td>{pr}</td></tr>")
        out.append("</table>")
    return "".join(out)


def render(report: dict) -> str:
    p, s = report["provenance"], report["summary"]
    run = report["prove_run"]
    prov_rows = [("report generated", p.get("date")), ("flashproof commit", p.get("commit")),
                 ("Python / z3 / sympy", f"{p.get('python')} / {p.get('z3')} / {p.get('sympy')}"),
                 ("machine", p.get("machine"))]
    if run:
        prov_rows += [("proof run", f"{run.get('generated')} · {run.get('command')} · {run.get('total_seconds')} s on "
                                    f"{run.get('jobs')} jobs · {'OK' if run.get('ok') else 'NOT OK'}"),
                      ("proof run versions", ", ".join(f"{k} {v}" for k, v in (run.get("versions") or {}).items()))]
    else:
        prov_rows.append(("proof run", "none found (out/audit.json missing)"))
    legend = " ".join(chip(k) + f" {n}" for k, n in s["items"].items())
    verd = " ".join(chip(k, attr="verdict") + f" {n}" for k, n in s["ledger"].items())
    probs = ""
    if report["problems"]:
        li = [f"<li>{escape(x)}</li>" for x in report["problems"]]
        more = (f"<details><summary>{len(li) - 5} more</summary><ul>{''.join(li[5:])}</ul></details>"
                if len(li) > 5 else "")
        probs = (f"<div class='problems'><b>Problems ({len(li)})</b><ul>{''.join(li[:5])}</ul>{more}</div>")
    secs = []
    nav = []
    for k, sec in enumerate(report["sections"]):
        if not sec["items"]:
            continue
        nav.append(f'<a href="#sec-{k}">{escape(sec["title"].split(" (")[0])}</a>')
        secs.append(f'<h2 id="sec-{k}">{escape(sec["title"])}</h2>' + "".join(_item(it) for it in sec["items"]))
    nav.append('<a href="#ledger">Claims ledger</a>')
    g = report["graph"]
    return "".join([
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>flashproof audit trail</title><style>", CSS, "</style></head><body><main>",
        "<h1>flashproof audit trail</h1>",
        "<p>What has been checked, how, on which bounds and with what result, for every item of the theorem "
        "page and every quantitative claim of the seed documents. Every status below is derived from the "
        "proof run's results; a result whose sources changed since it was obtained is shown as stale.</p>",
        "<table>", "".join(f"<tr><th>{escape(a)}</th><td>{escape(str(b))}</td></tr>" for a, b in prov_rows), "</table>",
        f"<p class='legend'>Items: {legend}</p><p class='legend'>Seed claims ({s['claims']}): {verd}</p>",
        probs, "<nav>", " ".join(nav), "</nav>",
        "<h2 id='graph'>Dependency graph</h2><p class='muted'>Arrows go from an item to the items that use it; "
        "colour is the derived status; click a node to jump to its section.</p>",
        f"<div class='graph'>{graph_svg(g['nodes'], g['edges'])}</div>",
        *secs,
        "<h2 id='ledger'>Claims ledger</h2><p>Every numeric or quantitative claim of the seeds. A figure is "
        "<i>confirmed</i> when the recomputed value rounds to it at the precision the seed prints; otherwise it is "
        "<i>off by X%</i>. Citations of external measurements are listed, never confirmed. Recomputable claims "
        "are obligations of <code>make prove</code> (an erratum is expected to be refuted).</p>",
        _ledger(report["ledger"]),
        "</main><script>", SCRIPT, "</script></body></html>\n",
    ])
