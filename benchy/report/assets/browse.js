// `benchy browse`: tick runs, and each ticked after the first is set against the first, with the
// comparisons worked out when the page was written (compare's statistics; nothing is computed here).
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("browse").textContent);
  var out = document.getElementById("compare");
  var picked = [];
  var VERDICT = { faster: "#2ca02c", slower: "#d62728" };

  function esc(text) {
    var d = document.createElement("div");
    d.textContent = text == null ? "" : String(text);
    return d.innerHTML;
  }
  function num(v, d) {
    return v == null ? "n/a" : Number(v).toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: d });
  }
  function table(headers, rows) {
    return '<table><thead><tr>' + headers.map(function (h) { return "<th>" + esc(h) + "</th>"; }).join("") +
      "</tr></thead><tbody>" + rows.map(function (r) {
        return "<tr>" + r.map(function (c) { return "<td>" + esc(c) + "</td>"; }).join("") + "</tr>";
      }).join("") + "</tbody></table>";
  }
  function figure(div, pair) {
    var metrics = [];
    pair.changes.forEach(function (c) { if (metrics.indexOf(c.metric) < 0) { metrics.push(c.metric); } });
    var traces = metrics.map(function (m) {
      var rows = pair.changes.filter(function (c) { return c.metric === m && c.pct != null && c.ci_pct; });
      return {
        type: "scatter", mode: "markers", name: m,
        x: rows.map(function (c) { return Math.max(c.pct, -100); }),
        y: rows.map(function (c) { return c.case + " · " + m; }),
        marker: { size: 9, color: rows.map(function (c) { return VERDICT[c.verdict] || "#888"; }) },
        error_x: {
          type: "data", symmetric: false,
          array: rows.map(function (c) { return c.ci_pct[1] - c.pct; }),
          arrayminus: rows.map(function (c) { return Math.max(c.pct, -100) - Math.max(c.ci_pct[0], -100); })
        },
        customdata: rows.map(function (c) { return [c.a, c.b, c.ci_pct[0], c.ci_pct[1], c.p == null ? "n/a" : c.p.toPrecision(2), c.verdict]; }),
        showlegend: false,
        hovertemplate: "%{y}<br>%{customdata[0]:,.1f} → %{customdata[1]:,.1f} (%{x:+.1f}%)" +
          "<br>95% CI %{customdata[2]:+.1f}% … %{customdata[3]:+.1f}%<br>p = %{customdata[4]} · %{customdata[5]}<extra></extra>"
      };
    });
    var layout = {
      height: 110 + 26 * pair.changes.length, margin: { l: 200, r: 20, t: 20, b: 50 },
      xaxis: { title: { text: "change vs " + pair.a + " (% of its median), 95% CI" }, zeroline: true },
      yaxis: { automargin: true, autorange: "reversed" }, hovermode: "closest"
    };
    return window.benchyPlotly().then(function (P) {
      return P.newPlot(div, traces, layout, { responsive: true, displaylogo: false });
    });
  }
  function show() {
    if (picked.length < 2) {
      out.innerHTML = '<p class="caption">Tick two runs to compare them.</p>';
      delete document.body.dataset.compared;
      return;
    }
    var base = picked[0], html = "", drawn = [];
    picked.slice(1).forEach(function (other, k) {
      var pair = data.pairs[base + "," + other];
      var title = data.runs[other].id + " against " + data.runs[base].id;
      html += "<h2>" + esc(title) + "</h2>";
      if (!pair) { html += "<p>Not compared: the page was written over too many runs.</p>"; return; }
      if (pair.error) { html += "<p>Cannot compare: " + esc(pair.error) + "</p>"; return; }
      pair.warnings.forEach(function (w) { html += '<p class="qualified">⚠ ' + esc(w) + "</p>"; });
      if (pair.setup.length) {
        html += "<h3>Setup differences</h3>" + table(["setting", pair.a, pair.b], pair.setup);
      }
      html += '<div class="plot" id="cmp-' + k + '"></div><p class="caption">Each case and metric: the change ' +
        "in % of " + esc(pair.a) + "'s median, with its 95% CI; green: significantly faster, red: significantly " +
        "slower, grey: no significant or only a negligible difference (benchy compare's verdicts).</p>";
      html += table(["case", "metric", pair.a, pair.b, "n", "change", "95% CI of the change", "p (adjusted)", "verdict"],
        pair.changes.map(function (c) {
          return [c.case, c.metric, num(c.a, 1), num(c.b, 1), c.n.join(" / "), c.pct == null ? "n/a" : num(c.pct, 1) + "%",
            c.ci_pct ? num(c.ci_pct[0], 1) + "% … " + num(c.ci_pct[1], 1) + "%" : "n/a", c.p == null ? "n/a" : c.p.toPrecision(2),
            c.verdict + (c.caveats.length ? " ⚠" : "") + (c.reason ? " (" + c.reason + ")" : "")];
        }));
      drawn.push([k, pair]);
    });
    out.innerHTML = html;
    Promise.all(drawn.map(function (d) { return figure(document.getElementById("cmp-" + d[0]), d[1]); }))
      .then(function () { document.body.dataset.compared = String(drawn.length); });
  }
  document.querySelectorAll("input.pick").forEach(function (box) {
    box.addEventListener("change", function () {
      var i = Number(box.value);
      picked = picked.filter(function (p) { return p !== i; });
      if (box.checked) { picked.push(i); }
      show();
    });
  });
})();
