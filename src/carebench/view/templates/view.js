(function () {
  "use strict";
  /* carebench view: filter the runs table and search the runs' texts. Every piece of data
     comes from inert blocks (#view-data, and each run's records.jsonl in a
     script.run-records block) and is put on the page with textContent, never parsed as HTML. */
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

  /* The texts of the records, found by shape (records differ by suite): every string of a
     record with a space in it and at least MIN_CHARS long, except the fields below; a
     transcript turn's content is named by its role. A text repeated within a run is kept
     once. Parsed on the first search, then kept. */
  var MIN_CHARS = 16;
  var ID_FIELDS = ["item_id", "task_id", "prompt_id", "persona", "persona_id", "conversation_id", "case_id", "id"];
  var SYSTEM_FIELDS = ["method", "responder", "system", "chatbot", "judge", "model"];
  var NOT_TEXT = new Set(["status", "error", "kind", "model", "scope", "command", "path"]
    .concat(ID_FIELDS, SYSTEM_FIELDS));
  var texts = null;  /* [run index, where, field, text, text in lower case] */

  function isObject(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }
  function isProse(v) { return v.length >= MIN_CHARS && v.indexOf(" ") >= 0; }

  function where(rec) {
    var ids = [];
    for (var k = 0; k < ID_FIELDS.length && ids.length < 2; k++) {
      var v = rec[ID_FIELDS[k]];
      if (typeof v === "string" || (typeof v === "number" && Number.isInteger(v))) {
        ids.push(ID_FIELDS[k].replace(/_id$/, "") + " " + v);
      }
    }
    for (var j = 0; j < SYSTEM_FIELDS.length; j++) {
      var s = rec[SYSTEM_FIELDS[j]];
      if (typeof s === "string" && s) { ids.push(s); break; }
    }
    return ids.join(", ");
  }

  function collect(obj, field, depth, emit) {
    if (typeof obj === "string") {
      if (isProse(obj)) { emit(field, obj); }
    } else if (depth > 4) {
      return;
    } else if (Array.isArray(obj)) {
      obj.forEach(function (v) { collect(v, field, depth + 1, emit); });
    } else if (isObject(obj)) {
      var role = obj.role;
      Object.keys(obj).forEach(function (k) {
        var v = obj[k];
        if (NOT_TEXT.has(k) || !(typeof v === "string" || typeof v === "object") || v === null) { return; }
        collect(v, k === "content" && typeof role === "string" ? role : k, depth + 1, emit);
      });
    }
  }

  function allTexts() {
    if (texts) { return texts; }
    texts = [];
    document.querySelectorAll("script.run-records").forEach(function (block) {
      var run = Number(block.getAttribute("data-run"));
      var seen = new Set();
      block.textContent.split("\n").forEach(function (line) {
        var rec;
        if (!line.trim()) { return; }
        try { rec = JSON.parse(line); } catch (e) { return; }  /* a broken line hides no other */
        if (!isObject(rec)) { return; }
        var at = where(rec);
        collect(rec, "", 0, function (field, text) {
          if (seen.has(text)) { return; }
          seen.add(text);
          texts.push([run, at, field, text, text.toLowerCase()]);
        });
      });
    });
    return texts;
  }

  function search() {
    var q = box.value.trim().toLowerCase();
    while (results.firstChild) { results.removeChild(results.firstChild); }
    if (q.length < 2) { summary.textContent = "Type at least two characters."; return; }
    var found = 0;
    allTexts().forEach(function (entry) {
      var at = entry[4].indexOf(q);
      if (at < 0) { return; }
      found += 1;
      if (found > LIMIT) { return; }
      var run = data.runs[entry[0]];
      var li = document.createElement("li");
      var a = document.createElement(run.href ? "a" : "span");
      if (run.href) { a.href = run.href; }
      a.className = "hit-run";
      a.textContent = run.name;
      var meta = document.createElement("span");
      meta.className = "hit-meta";
      meta.textContent = " " + run.suite + (entry[2] ? " \u00b7 " + entry[2] : "") + (entry[1] ? " \u00b7 " + entry[1] : "");
      var p = document.createElement("p");
      p.className = "hit-text";
      var parts = snippet(entry[3], at, q.length);
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
