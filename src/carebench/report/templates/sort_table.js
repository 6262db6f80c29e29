(function () {
  "use strict";
  /* Sort a carebench report table by a clicked column header. Only existing row elements
     are moved: no text is parsed as HTML. Numbers compare by value (data-sort holds the
     full-precision number), text by code point; empty cells always go last, and ties keep
     the table's original order. A second click on the same header reverses the order. */
  function cmpText(x, y) { return x < y ? -1 : (x > y ? 1 : 0); }
  var tables = document.querySelectorAll("table.sortable");
  Array.prototype.forEach.call(tables, function (table) {
    var body = table.tBodies[0];
    var original = Array.prototype.slice.call(body.rows);
    var position = new Map();
    original.forEach(function (tr, i) { position.set(tr, i); });
    var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
    heads.forEach(function (th, col) {
      var button = document.createElement("button");
      button.type = "button";
      button.className = "sort";
      while (th.firstChild) { button.appendChild(th.firstChild); }
      th.appendChild(button);
      var numeric = th.getAttribute("data-sort-type") === "number";
      button.addEventListener("click", function () {
        var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
        var rows = original.slice();
        rows.sort(function (a, b) {
          var x = a.cells[col].getAttribute("data-sort");
          var y = b.cells[col].getAttribute("data-sort");
          if (x === "" || y === "") {
            if (x !== y) { return x === "" ? 1 : -1; }
          } else {
            var c = numeric ? Number(x) - Number(y) : cmpText(x, y);
            if (c !== 0) { return dir * c; }
          }
          return position.get(a) - position.get(b);
        });
        rows.forEach(function (tr) { body.appendChild(tr); });
        heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
      });
    });
  });
})();
