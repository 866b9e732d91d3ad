// benchy's pages: draw each figure from its plotly.js spec, sort tables by a header click,
// filter a table's rows by the words typed above it. Nothing here fetches anything.
(function () {
  "use strict";
  // Figures draw lazily: the text and tables paint first, plotly.js (a 1.2 MB bundle, the page's
  // longest evaluation) is evaluated only when a figure is about to be seen, figures in view
  // draw first, and the rest draw one at a time when the browser is idle, so none waits for a scroll.
  var specs = JSON.parse(document.getElementById("figures").textContent);
  var config = { responsive: true, displaylogo: false };
  var plotly = null;
  function loadPlotly() {
    if (!plotly) {
      plotly = new Promise(function (resolve) {
        var source = document.getElementById("plotly-js");
        if (!window.Plotly && source) {
          var script = document.createElement("script");
          script.textContent = source.textContent;  // runs on insertion, nothing is fetched
          document.head.appendChild(script);
          source.remove();
        }
        window.__plotlyAt = performance.now();  // benchmarks/bench_html.py: plotly.js evaluated
        resolve(window.Plotly);
      });
    }
    return plotly;
  }
  window.benchyPlotly = loadPlotly;  // browse.js draws through it too

  var divs = Array.prototype.slice.call(document.querySelectorAll("[data-figure]"));
  var done = 0;
  function draw(div) {
    if (div.dataset.drawing) { return Promise.resolve(); }
    div.dataset.drawing = "1";
    var spec = specs[div.dataset.figure];
    return loadPlotly().then(function (P) { return P.newPlot(div, spec.data, spec.layout, config); }).then(function () {
      done += 1;
      if (done === divs.length) {
        window.__drawnAt = performance.now();  // benchmarks/bench_html.py: every figure drawn
        document.body.dataset.drawn = String(done);
      }
    });
  }
  function inView(div) {
    var r = div.getBoundingClientRect();
    return r.bottom > 0 && r.top < window.innerHeight;
  }
  function opened() {
    window.__openAt = performance.now();  // benchmarks/bench_html.py: what a reader sees is drawn
    document.body.dataset.opened = "1";
  }
  var first = divs.filter(inView);
  if (first.length) { Promise.all(first.map(draw)).then(opened); } else { requestAnimationFrame(opened); }
  if (!divs.length) { document.body.dataset.drawn = "0"; }
  if ("IntersectionObserver" in window) {
    var seen = new IntersectionObserver(function (entries) {
      entries.forEach(function (e) { if (e.isIntersecting) { seen.unobserve(e.target); draw(e.target); } });
    }, { rootMargin: "400px 0px" });
    divs.forEach(function (div) { seen.observe(div); });
  }
  var idle = window.requestIdleCallback || function (f) { return setTimeout(f, 50); };
  function drawRest() {
    var next = divs.filter(function (div) { return !div.dataset.drawing; })[0];
    if (next) { draw(next).then(function () { idle(drawRest, { timeout: 1000 }); }); }
  }
  window.addEventListener("load", function () { idle(drawRest, { timeout: 1000 }); });

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
