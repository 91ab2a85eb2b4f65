/* Test driver for tests/audit/test_audit_browser.py, appended to a COPY of the report after audit.js.
 * It uses the page as a reader would (typing into the search box, picking filters, clicking an
 * obligation link) through real DOM events, and writes what it saw as JSON into a pre element
 * for the test to compare with the report data. */
(function () {
  "use strict";
  function all(sel) { return Array.prototype.slice.call(document.querySelectorAll(sel)); }
  function visible(sel, attr) {
    return all(sel).filter(function (el) { return !el.classList.contains("hidden"); })
      .map(function (el) { return el.getAttribute(attr); });
  }
  function set(id, value) {
    var el = document.getElementById(id);
    el.value = value;
    el.dispatchEvent(new Event(el.tagName === "SELECT" ? "change" : "input", { bubbles: true }));
  }
  function snapshot() {
    return { items: visible("section.item", "data-item"), obligations: visible("section.obligation", "data-obligation"),
             claims: visible("tr.claim", "id"), count: document.getElementById("match-count").textContent };
  }
  var out = { cases: {} }, cases = window.DRIVER_CASES || [];
  cases.forEach(function (c) {
    set("q", c.q || ""); set("f-status", c.status || ""); set("f-kind", c.kind || ""); set("f-assumption", c.assumption || "");
    out.cases[c.name] = snapshot();
  });
  set("q", ""); set("f-status", ""); set("f-kind", ""); set("f-assumption", "");
  out.reset = snapshot();
  /* collapse everything, then follow the first item's first obligation link: the target must open */
  document.getElementById("collapse-all").click();
  var link = document.querySelector("section.item a.ob-ref");
  out.link = { href: link.getAttribute("href") };
  link.click();
  function finish() {
    var target = document.getElementById(decodeURIComponent(out.link.href.slice(1)));
    out.link.hash = location.hash;
    out.link.target_open = !!(target && target.querySelector("details").open);
    out.link.group_open = !!(target && target.closest("details.group").open);
    // ask for KaTeX's main face: a face loads only once laid-out text uses it (formulas in closed
    // <details> are not laid out) and fonts.ready waits only for loads already started, so whether it
    // had loaded by now depended on timing; loaded here, its status says whether the vendored file is
    // reachable and valid ("error" otherwise)
    document.fonts.load("1em KaTeX_Main").catch(function () {}).then(function () { return document.fonts.ready; }).then(function () {
      var faces = [];
      document.fonts.forEach(function (f) { if (/^"?KaTeX/.test(f.family)) { faces.push(f.family + ":" + f.status); } });
      out.fonts = faces;
      var pre = document.createElement("pre");
      pre.id = "driver-result";
      pre.textContent = JSON.stringify(out);
      document.body.appendChild(pre);
    });
  }
  setTimeout(finish, 200);
})();
