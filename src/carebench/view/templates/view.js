(function () {
  "use strict";
  /* carebench view: filter the runs table and search the runs' texts. Every piece of data
     comes from the inert JSON block #view-data and is put on the page with textContent,
     never parsed as HTML. */
  var data = JSON.parse(document.getElementById("view-data").textContent);
  var rows = Array.prototype.slice.call(document.querySelectorAll("#runs tbody tr"));
  var suite = document.getElementById("f-suite");
  var flag = document.getElementById("f-flag");
  var status = document.getElementById("f-status");
  var text = document.getElementById("f-text");
  var shown = document.getElementById("runs-shown");

  function filterRuns() {
    var q = text.value.trim().toLowerCase();
    var n = 0;
    rows.forEach(function (tr) {
      var ok = (!suite.value || tr.getAttribute("data-suite") === suite.value) &&
        (!flag.value || (tr.getAttribute("data-flags") || "").split("|").indexOf(flag.value) >= 0) &&
        (!status.value || tr.getAttribute("data-status") === status.value) &&
        (!q || tr.textContent.toLowerCase().indexOf(q) >= 0);
      tr.hidden = !ok;
      if (ok) { n += 1; }
    });
    shown.textContent = n + " of " + rows.length + " runs shown";
  }
  [suite, flag, status].forEach(function (el) { el.addEventListener("change", filterRuns); });
  text.addEventListener("input", filterRuns);

  var box = document.getElementById("q");
  var results = document.getElementById("results");
  var summary = document.getElementById("results-summary");
  var LIMIT = 200;

  function snippet(t, at, len) {
    var start = Math.max(0, at - 80);
    var end = Math.min(t.length, at + len + 160);
    return [(start > 0 ? "\u2026" : "") + t.slice(start, at), t.slice(at, at + len),
            t.slice(at + len, end) + (end < t.length ? "\u2026" : "")];
  }

  function search() {
    var q = box.value.trim().toLowerCase();
    while (results.firstChild) { results.removeChild(results.firstChild); }
    if (q.length < 2) { summary.textContent = "Type at least two characters."; return; }
    var found = 0;
    data.texts.forEach(function (texts, i) {
      var run = data.runs[i];
      texts.forEach(function (entry) {
        var at = entry[2].toLowerCase().indexOf(q);
        if (at < 0) { return; }
        found += 1;
        if (found > LIMIT) { return; }
        var li = document.createElement("li");
        var a = document.createElement(run.href ? "a" : "span");
        if (run.href) { a.href = run.href; }
        a.className = "hit-run";
        a.textContent = run.name;
        var meta = document.createElement("span");
        meta.className = "hit-meta";
        meta.textContent = " " + run.suite + (entry[1] ? " \u00b7 " + entry[1] : "") + (entry[0] ? " \u00b7 " + entry[0] : "");
        var p = document.createElement("p");
        p.className = "hit-text";
        var parts = snippet(entry[2], at, q.length);
        var mark = document.createElement("mark");
        mark.textContent = parts[1];
        p.appendChild(document.createTextNode(parts[0]));
        p.appendChild(mark);
        p.appendChild(document.createTextNode(parts[2]));
        li.appendChild(a);
        li.appendChild(meta);
        li.appendChild(p);
        results.appendChild(li);
      });
    });
    summary.textContent = found === 0 ? "No text matches." :
      found + " text(s) match" + (found > LIMIT ? "; the first " + LIMIT + " are shown" : "") + ".";
  }
  box.addEventListener("input", search);
  document.getElementById("search-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    search();
  });
  document.documentElement.classList.add("js");
  filterRuns();
})();
