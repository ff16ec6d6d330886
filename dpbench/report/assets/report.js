// dpbench report page: draws the figures of the page's JSON (dpbench/report/site.py) with plotly.js,
// a shared legend per figure (click hides a method in every panel), linear/log switches, and the
// ledger panel a click on a point (or an audit row) opens. No network access: everything is in the
// page or next to it.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var ledger = document.getElementById("ledger");
  var ledgerBody = document.getElementById("ledger-body");

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k];
      else if (k === "html") node.innerHTML = attrs[k];
      else node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c) node.appendChild(c); });
    return node;
  }

  function fmt(v) {
    if (v === null || v === undefined) return "–";
    if (typeof v === "number") {
      if (Number.isInteger(v) && Math.abs(v) >= 1000) return v.toLocaleString("en-US");
      return Number(v.toPrecision(6)).toString();
    }
    if (typeof v === "object") return JSON.stringify(v);
    return String(v);
  }

  // ---- figures -------------------------------------------------------------------------------
  var DASH_SVG = { solid: "", dash: "6,3", dashdot: "6,2,1.5,2", dot: "1.5,2.5", longdash: "10,3", loosedot: "1,4", none: "" };

  // a plotly.js marker symbol (the traces' marker.symbol, charts.py) as an SVG path centred at (15, 6),
  // so the legend shows the marker the panels draw; "-open": outline only
  var SYMBOL_PATHS = {
    circle: "M18.5,6A3.5,3.5 0 1,1 11.5,6A3.5,3.5 0 1,1 18.5,6Z",
    square: "M11.5,2.5H18.5V9.5H11.5Z",
    diamond: "M15,1.5L19.5,6L15,10.5L10.5,6Z",
    "triangle-up": "M15,1.8L19.2,9.5H10.8Z",
    "triangle-down": "M15,10.2L19.2,2.5H10.8Z",
    star: "M15,0.8L16.5,4.6L20.5,4.7L17.4,7.2L18.5,11.1L15,8.8L11.5,11.1L12.6,7.2L9.5,4.7L13.5,4.6Z",
    x: "M11.5,2.5L18.5,9.5M18.5,2.5L11.5,9.5",
    "x-thin": "M11.5,2.5L18.5,9.5M18.5,2.5L11.5,9.5",
  };

  function symbolPath(symbol) {
    var open = /-open$/.test(symbol), base = symbol.replace(/-open$/, "");
    var path = document.createElementNS("http://www.w3.org/2000/svg", "path");
    path.setAttribute("d", SYMBOL_PATHS[base] || SYMBOL_PATHS.circle);
    path.setAttribute("data-symbol", symbol);
    path.filled = !open && base !== "x" && base !== "x-thin";
    path.lines = base === "x" || base === "x-thin";
    return path;
  }

  function legendSwatch(entry) {
    var ns = "http://www.w3.org/2000/svg";
    var svg = document.createElementNS(ns, "svg");
    svg.setAttribute("width", "30"); svg.setAttribute("height", "12"); svg.setAttribute("aria-hidden", "true");
    if (entry.dash !== "none") {
      var line = document.createElementNS(ns, "line");
      line.setAttribute("x1", "1"); line.setAttribute("x2", "29"); line.setAttribute("y1", "6"); line.setAttribute("y2", "6");
      line.setAttribute("stroke", entry.colour); line.setAttribute("stroke-width", "2");
      if (DASH_SVG[entry.dash]) line.setAttribute("stroke-dasharray", DASH_SVG[entry.dash]);
      svg.appendChild(line);
    }
    if (entry.marker === false) return svg;  // a line without markers (a fitted rate, the majority class)
    var mark = symbolPath(entry.symbol || (entry.filled ? "circle" : "circle-open"));
    mark.setAttribute("stroke", entry.colour); mark.setAttribute("stroke-width", "1.5");
    mark.setAttribute("fill", mark.filled ? entry.colour : (mark.lines ? "none" : "white"));
    svg.appendChild(mark);
    return svg;
  }

  // an axis of a panel on a scale: the figure's attributes for that scale (title in lines that fit),
  // and on a log scale the panel's own ticks (labelled decades, unlabelled minor ticks; charts.py log_ticks)
  function axisLayout(fig, panel, axis, type) {
    var out = Object.assign({}, fig.axes[axis][type]);
    if (type === "log") Object.assign(out, panel.log_ticks[axis]);
    return out;
  }

  // the title sits below plotly's toolbar (the modebar, top right, 26 px high), never under it
  function panelLayout(fig, panel) {
    return {
      title: { text: panel.title, font: { size: 13 }, x: 0.5, xanchor: "center", y: 1, yref: "container",
               yanchor: "top", pad: { t: 30 } },
      xaxis: axisLayout(fig, panel, "x", fig.x_log ? "log" : "linear"),
      yaxis: axisLayout(fig, panel, "y", fig.y_log ? "log" : "linear"),
      margin: { l: 60, r: 12, t: 54, b: 46 }, height: 340, autosize: true, showlegend: false, hovermode: "closest",
      hoverlabel: { align: "left" }, paper_bgcolor: "white", plot_bgcolor: "white",
    };
  }

  // responsive: a panel follows its grid cell's width; narrow windows (a phone) get no toolbar at all
  var NARROW = 700;
  var CONFIG = { responsive: true, displaylogo: false, modeBarButtonsToRemove: ["lasso2d", "select2d"],
                 displayModeBar: window.innerWidth >= NARROW ? "hover" : false };

  function drawFigure(fig) {
    var section = el("section", { class: "figure", id: "fig-" + fig.id });
    section.appendChild(el("h3", { text: fig.title }));
    if (fig.static && fig.static.length) {
      var links = el("p", { class: "static" }, [document.createTextNode("static: ")]);
      fig.static.forEach(function (href, i) {
        if (i) links.appendChild(document.createTextNode(" · "));
        links.appendChild(el("a", { href: href, text: href.split(".").pop().toUpperCase() }));
      });
      section.appendChild(links);
    }
    if (!fig.panels.length) {
      section.appendChild(el("p", { class: "empty", text: fig.empty || "nothing to draw" }));
      var png = (fig.static || []).filter(function (h) { return /\.png$/.test(h); })[0];
      if (png) section.appendChild(el("img", { src: png, alt: fig.title, class: "static-figure" }));
      return section;
    }
    var controls = el("div", { class: "controls" });
    ["x", "y"].forEach(function (axis) {
      var group = el("span", { class: "scale", "data-axis": axis }, [document.createTextNode(axis + " axis: ")]);
      ["linear", "log"].forEach(function (type) {
        var on = (fig[axis + "_log"] ? "log" : "linear") === type;
        var b = el("button", { type: "button", "data-scale": type, "aria-pressed": on ? "true" : "false", text: type });
        b.addEventListener("click", function () {
          group.querySelectorAll("button").forEach(function (o) { o.setAttribute("aria-pressed", o === b ? "true" : "false"); });
          plots.forEach(function (div) {  // the whole axis: a log scale brings its ticks, a linear one drops them
            var update = {}; update[axis + "axis"] = axisLayout(fig, fig.panels[Number(div.dataset.panel)], axis, type);
            Plotly.relayout(div, update);
          });
        });
        group.appendChild(b);
      });
      controls.appendChild(group);
    });
    section.appendChild(controls);
    var legend = el("ul", { class: "legend" });
    var hidden = {};
    var plots = [];
    fig.legend.forEach(function (entry) {
      var group = entry.group || entry.name;
      if (entry.key) {  // explains a marker (the ▽ at a log axis's floor): nothing to hide
        legend.appendChild(el("li", { class: "key", "data-group": group }, [legendSwatch(entry), el("span", { text: entry.name })]));
        return;
      }
      var item = el("li", { tabindex: "0", role: "button", "aria-pressed": "true", "data-group": group },
        [legendSwatch(entry), el("span", { text: entry.name })]);
      function toggle() {
        hidden[group] = !hidden[group];
        item.classList.toggle("off", !!hidden[group]);
        item.setAttribute("aria-pressed", hidden[group] ? "false" : "true");
        plots.forEach(function (div) {
          var idx = [];
          div.data.forEach(function (t, i) { if (t.legendgroup === group) idx.push(i); });
          if (idx.length) Plotly.restyle(div, { visible: hidden[group] ? false : true }, idx);
        });
      }
      item.addEventListener("click", toggle);
      item.addEventListener("keydown", function (e) { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); toggle(); } });
      legend.appendChild(item);
    });
    section.appendChild(legend);
    var grid = el("div", { class: "panels" });
    section.appendChild(grid);
    fig.panels.forEach(function (panel, i) {
      var div = el("div", { class: "plot", "data-figure": fig.id, "data-panel": String(i) });
      grid.appendChild(div);
      plots.push(div);
      pending.push(function () {
        return Plotly.newPlot(div, panel.traces, panelLayout(fig, panel), CONFIG).then(function () {
          div.on("plotly_click", function (ev) {
            var p = ev.points && ev.points[0];
            if (!p || p.customdata === undefined || p.customdata === null) return;
            if (fig.id === "audit") showAudit(p.customdata);
            else showGroup(p.customdata, p, fig);
          });
        });
      });
    });
    return section;
  }

  // ---- ledger panel --------------------------------------------------------------------------
  function dl(pairs) {
    var list = el("dl", { class: "ledger" });
    pairs.forEach(function (kv) {
      list.appendChild(el("dt", { text: kv[0] }));
      list.appendChild(el("dd", { text: fmt(kv[1]) }));
    });
    return list;
  }

  function flat(obj, prefix, out) {
    Object.keys(obj).forEach(function (k) {
      var v = obj[k], name = prefix ? prefix + "." + k : k;
      if (v && typeof v === "object" && !Array.isArray(v)) flat(v, name, out);
      else out.push([name, v]);
    });
    return out;
  }

  function ledgerView(entry) {
    var head = [];
    data.ledger_head.forEach(function (k) {
      if (!(k in entry)) return;
      if (k === "epsilon_spent" && entry[k] && typeof entry[k] === "object") {
        Object.keys(entry[k]).forEach(function (acc) { head.push(["ε spent (" + acc + ")", entry[k][acc]]); });
      } else if (k === "sampling" && entry[k] && typeof entry[k] === "object") {
        head.push(["sampling", Object.keys(entry[k]).map(function (s) { return s + " " + fmt(entry[k][s]); }).join(", ")]);
      } else if (k === "paper_claim" && entry[k] && typeof entry[k] === "object") {
        head.push(["paper's claim", "ε = " + fmt(entry[k].epsilon) + ", δ = " + fmt(entry[k].delta)]);
        if (entry[k].why_unsound) head.push(["why the paper's claim is not a guarantee", entry[k].why_unsound]);
      } else if (k === "noise_free_fraction") {
        head.push(["noise-free share of steps", entry[k]]);
      } else {
        head.push([k.replace(/_/g, " "), entry[k]]);
      }
    });
    var box = el("div", { class: "ledger-entry" }, [dl(head)]);
    var more = el("details", {}, [el("summary", { text: "every ledger field" }), dl(flat(entry, "", []))]);
    box.appendChild(more);
    return box;
  }

  function openLedger(children) {
    ledgerBody.innerHTML = "";
    children.forEach(function (c) { ledgerBody.appendChild(c); });
    ledger.hidden = false;
    ledger.scrollTop = 0;
  }

  function showGroup(id, point, fig) {
    var g = data.groups[id];
    if (!g) return;
    var eps = g.epsilon === null ? "non-private" : "ε = " + fmt(g.epsilon);
    var nodes = [el("h2", { text: g.label }), el("p", { class: "where", text: g.dataset + " · " + g.model + " · " + eps })];
    var summary = [["metric (this point)", g.metric], ["value drawn", point ? point.y : null]];
    if (point && fig && fig.x_title && !(g.epsilon === null && fig.x_title.indexOf("ε") >= 0)) summary.push([fig.x_title, point.x]);
    summary.push(["curve's guarantee", g.epsilon === null ? "none: a non-private baseline" : (g.curve_claim || "none")]);
    if (g.dp_check) summary.push(["dpbench's checks found", g.dp_check]);
    if (g.eps_end_to_end !== null) summary.push(["ε end to end (tuning + training)", g.eps_end_to_end]);
    summary.push(["selected by", (g.selected_by || "–") + " (" + g.candidates.length + " candidate" + (g.candidates.length === 1 ? "" : "s") + ")"]);
    nodes.push(dl(summary));
    if (g.candidates.length) {
      var rows = g.candidates.map(function (c) {
        return el("tr", { class: c.selected ? "selected" : "" }, [el("td", { text: c.selected ? "✓" : "" }),
          el("td", { text: c.params }), el("td", { text: fmt(c.score) }), el("td", { text: String(c.runs) })]);
      });
      nodes.push(el("h3", { text: "candidates" }));
      if (g.shared_params) nodes.push(el("p", { class: "reps", text: "shared by every candidate: " + g.shared_params }));
      nodes.push(el("div", { class: "table-wrap" }, [el("table", { class: "candidates" }, [
        el("thead", {}, [el("tr", {}, ["", "hyperparameters", "mean " + g.score, "runs"].map(function (h) { return el("th", { text: h }); }))]),
        el("tbody", {}, rows)])]));
    }
    // runs grouped by identical ledgers
    var byLedger = {};
    var order = [];
    g.runs.forEach(function (r) {
      var k = r.ledger === null ? "none" : String(r.ledger);
      if (!(k in byLedger)) { byLedger[k] = []; order.push(k); }
      byLedger[k].push(r);
    });
    nodes.push(el("h3", { text: "privacy ledger" + (order.length > 1 ? "s (" + order.length + " distinct)" : "") }));
    order.forEach(function (k) {
      var runs = byLedger[k];
      var reps = runs.map(function (r) { return r.rep; });
      var values = runs.map(function (r) { return fmt(r.value); });
      nodes.push(el("p", { class: "reps", text: "seeds " + reps.join(", ") + " · " + g.metric + ": " + values.join(", ") }));
      runs.forEach(function (r) {  // private selection: the combination each seed's search chose
        if (r.params) nodes.push(el("p", { class: "reps", text: "seed " + r.rep + " chose " + r.params }));
      });
      if (k === "none") nodes.push(el("p", { text: "no ledger: a non-private run" }));
      else nodes.push(ledgerView(data.ledgers[Number(k)]));
    });
    openLedger(nodes);
  }

  function showAudit(id) {
    var row = data.audits[id];
    if (!row) return;
    openLedger([el("h2", { text: row.label }), el("p", { class: "where", text: "audit " + (id + 1) + " of " + data.audits.length }),
      dl(Object.keys(row).map(function (k) { return [k, row[k]]; }))]);
  }

  ledger.querySelector(".close").addEventListener("click", function () { ledger.hidden = true; });
  document.addEventListener("keydown", function (e) { if (e.key === "Escape") ledger.hidden = true; });
  document.querySelectorAll("tr[data-audit]").forEach(function (tr) {
    var open = function () { showAudit(Number(tr.getAttribute("data-audit"))); };
    tr.addEventListener("click", open);
    tr.addEventListener("keydown", function (e) { if (e.key === "Enter") open(); });
  });

  // ---- provenance ----------------------------------------------------------------------------
  function provenance() {
    var body = document.getElementById("provenance-body");
    var prov = data.provenance;
    var pairs = [], nested = [];
    Object.keys(prov).forEach(function (k) {
      if (prov[k] && typeof prov[k] === "object") nested.push(k); else if (prov[k] !== null) pairs.push([k, prov[k]]);
    });
    body.appendChild(dl(pairs));
    nested.forEach(function (k) {
      body.appendChild(el("h3", { text: k }));
      body.appendChild(dl(Object.keys(prov[k]).map(function (n) { return [n, prov[k][n]]; })));
    });
  }

  var pending = [];
  var list = document.getElementById("figure-list");
  data.figures.forEach(function (fig) { list.appendChild(drawFigure(fig)); });
  provenance();
  var chain = Promise.resolve();
  pending.forEach(function (draw) { chain = chain.then(draw); });
  chain.then(function () { document.body.dataset.ready = "1"; }, function (err) {
    document.body.dataset.ready = "error";
    console.error("dpbench report: a figure failed to draw", err);
  });
})();
