// benchy's pages: draw each figure from its plotly.js spec, sort tables by a header click,
// filter a table's rows by the words typed above it. Nothing here fetches anything.
(function () {
  "use strict";
  var specs = JSON.parse(document.getElementById("figures").textContent);
  var config = { responsive: true, displaylogo: false };
  var pending = [];
  document.querySelectorAll("[data-figure]").forEach(function (div) {
    var spec = specs[div.dataset.figure];
    pending.push(Plotly.newPlot(div, spec.data, spec.layout, config));
  });
  Promise.all(pending).then(function () {
    window.__drawnAt = performance.now();  // benchmarks/bench_html.py: time to a drawn page
    document.body.dataset.drawn = String(pending.length);
  });

  // "1,234.5 ± 3" → 1234.5; a cell with no number sorts after every number
  function key(cell) {
    var m = cell.textContent.replace(/,/g, "").match(/-?\d+(\.\d+)?(e[-+]?\d+)?/i);
    return m ? parseFloat(m[0]) : null;
  }
  function sortBy(table, column, th) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var descending = th.dataset.sorted === "asc";
    table.querySelectorAll("th").forEach(function (h) { delete h.dataset.sorted; });
    th.dataset.sorted = descending ? "desc" : "asc";
    var numeric = rows.some(function (r) { return key(r.cells[column]) !== null; });
    rows.sort(function (a, b) {
      var x, y;
      if (numeric) {
        x = key(a.cells[column]); y = key(b.cells[column]);
        if (x === null || y === null) { return (x === null) - (y === null); }
      } else {
        x = a.cells[column].textContent; y = b.cells[column].textContent;
      }
      var order = x < y ? -1 : x > y ? 1 : 0;
      return descending ? -order : order;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("thead th").forEach(function (th, column) {
      th.title = "sort";
      th.addEventListener("click", function () { sortBy(table, column, th); });
    });
  });
  document.querySelectorAll("input[data-filter]").forEach(function (input) {
    var table = document.getElementById(input.dataset.filter);
    input.addEventListener("input", function () {
      var words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
      Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
        var text = row.textContent.toLowerCase();
        row.hidden = !words.every(function (w) { return text.indexOf(w) >= 0; });
      });
    });
  });
})();
