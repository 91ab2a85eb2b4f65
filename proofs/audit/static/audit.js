/* flashproof audit report: formulas (KaTeX), search, filters, collapsing, and the page's self-check.
 *
 * The self-check sets <body data-audit-ready="ok"> only when this script ran without an error and:
 * every item section has a status chip, every claim row a verdict chip, every formula rendered with
 * KaTeX, no element id repeats, and every in-page link (#...) has its target. Otherwise the attribute
 * names what is wrong ("missing-status:...", "katex:...", "duplicate-ids:...", "broken-links:...",
 * "error:..."). It also publishes data-audit-items / -claims / -obligations / -formulas counts.
 * window.flashproofAudit.apply() re-runs the filters (the search box and selects call it).
 */
(function () {
  "use strict";
  var body = document.body;
  window.addEventListener("error", function (e) { body.setAttribute("data-audit-ready", "error:" + e.message); });

  function all(sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); }
  function words(el, attr) { var v = el.getAttribute(attr); return v ? v.split(/\s+/).filter(Boolean) : []; }

  /* Formulas: each .tex[data-tex] becomes KaTeX display math; a TeX error is counted, never hidden. */
  function renderFormulas() {
    var bad = [];
    all(".tex[data-tex]").forEach(function (el, k) {
      try {
        window.katex.render(el.getAttribute("data-tex"), el, { displayMode: true, throwOnError: true, output: "html" });
        el.setAttribute("data-rendered", "katex");
      } catch (err) {
        el.setAttribute("data-rendered", "error");
        el.title = String(err);
        var sec = el.closest("section");
        bad.push((sec ? sec.id : "formula-" + k) + "(" + String(err).slice(0, 60) + ")");
      }
    });
    return bad;
  }

  /* Collapsing: open every <details> around an element (a followed link, a search hit), and the
     element's own card body. */
  function reveal(el) {
    for (var d = el; d; d = d.parentElement) { if (d.tagName === "DETAILS") { d.open = true; } }
    var own = el.querySelector(":scope > details");
    if (own) { own.open = true; }
  }
  function onHash() {
    var id = decodeURIComponent(location.hash.slice(1));
    var el = id && document.getElementById(id);
    if (el) { reveal(el); el.scrollIntoView(); }
  }

  /* Search and filters. Items pass when they match the status, kind, assumption and text; obligations
     when they match the text and (with a status/kind/assumption filter set) check an item that passes
     those filters; claim rows when they match the text. */
  var q = document.getElementById("q"), fs = document.getElementById("f-status"),
      fk = document.getElementById("f-kind"), fa = document.getElementById("f-assumption"),
      count = document.getElementById("match-count");
  var items = all("section.item"), obligations = all("section.obligation"), claims = all("tr.claim");
  var text = new Map();
  items.concat(obligations, claims).forEach(function (el) { text.set(el, el.textContent.toLowerCase()); });

  function apply() {
    var needle = (q && q.value || "").trim().toLowerCase(), st = fs ? fs.value : "", kd = fk ? fk.value : "",
        as = fa ? fa.value : "", facet = !!(st || kd || as), passing = {};
    var hit = function (el) { return !needle || text.get(el).indexOf(needle) >= 0; };
    var shownItems = 0, shownObs = 0, shownClaims = 0;
    items.forEach(function (el) {
      var f = (!st || el.getAttribute("data-item-status") === st) && (!kd || el.getAttribute("data-kind") === kd) &&
              (!as || words(el, "data-assumptions").indexOf(as) >= 0);
      if (f) { passing[el.getAttribute("data-item")] = true; }
      var show = f && hit(el);
      el.classList.toggle("hidden", !show);
      if (show) { shownItems++; if (needle) { reveal(el); } }
    });
    obligations.forEach(function (el) {
      var f = !facet || words(el, "data-checks").some(function (i) { return passing[i]; });
      var show = f && hit(el);
      el.classList.toggle("hidden", !show);
      if (show) { shownObs++; if (needle) { reveal(el); } }
    });
    claims.forEach(function (el) {
      var show = !facet && hit(el);
      el.classList.toggle("hidden", !show);
      if (show) { shownClaims++; if (needle) { reveal(el); } }
    });
    if (count) {
      count.textContent = shownItems + "/" + items.length + " items, " + shownObs + "/" + obligations.length +
        " obligations, " + shownClaims + "/" + claims.length + " claims";
    }
    body.setAttribute("data-shown", [shownItems, shownObs, shownClaims].join(","));
    return { items: shownItems, obligations: shownObs, claims: shownClaims };
  }

  function check(katexErrors) {
    var bad = [];
    var missing = items.filter(function (el) {
      var c = el.querySelector(".chip[data-status]");
      return !c || !c.getAttribute("data-status");
    }).map(function (el) { return el.id; });
    var noverdict = claims.filter(function (el) { return !el.querySelector(".chip[data-verdict]"); })
      .map(function (el) { return el.id; });
    if (missing.length || noverdict.length) { bad.push("missing-status:" + missing.concat(noverdict).join(",")); }
    if (katexErrors.length) { bad.push("katex:" + katexErrors.join(",")); }
    var seen = {}, dup = [];
    all("[id]").forEach(function (el) { if (seen[el.id]) { dup.push(el.id); } seen[el.id] = true; });
    if (dup.length) { bad.push("duplicate-ids:" + dup.join(",")); }
    var broken = all('a[href^="#"]').map(function (a) { return decodeURIComponent(a.getAttribute("href").slice(1)); })
      .filter(function (id) { return id && !document.getElementById(id); });
    if (broken.length) { bad.push("broken-links:" + broken.join(",")); }
    return bad;
  }

  try {
    var katexErrors = window.katex ? renderFormulas() : ["katex-not-loaded"];
    [q, fs, fk, fa].forEach(function (el) { if (el) { el.addEventListener("input", apply); el.addEventListener("change", apply); } });
    var ex = document.getElementById("expand-all"), co = document.getElementById("collapse-all");
    if (ex) { ex.addEventListener("click", function () { all("details").forEach(function (d) { d.open = true; }); }); }
    if (co) { co.addEventListener("click", function () { all("details").forEach(function (d) { d.open = false; }); }); }
    window.addEventListener("hashchange", onHash);
    window.flashproofAudit = { apply: apply, reveal: reveal };
    apply();
    if (location.hash) { onHash(); }
    body.setAttribute("data-audit-items", String(items.length));
    body.setAttribute("data-audit-claims", String(claims.length));
    body.setAttribute("data-audit-obligations", String(obligations.length));
    body.setAttribute("data-audit-formulas", String(all(".tex[data-rendered=katex]").length));
    var bad = check(katexErrors);
    body.setAttribute("data-audit-ready", bad.length ? bad.join(";") : "ok");
  } catch (err) {
    body.setAttribute("data-audit-ready", "error:" + err);
  }
})();
