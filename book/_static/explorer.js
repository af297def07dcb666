/*
 * Static explorer of the book's chapter 8 (attnlib): plain JavaScript over SVG, no library, no network.
 *
 * The chapter's notebook output is a <div class="attnlib-explorer"> holding the precomputed grid as JSON
 * (<script type="application/json" class="attnlib-explorer-data">, written by attnlib.static_explorer). This
 * script, which jupyter-book loads on every page, finds such divs and draws in each:
 *   - two sliders, omega and alpha, over the grid values;
 *   - (a) the test errors of both branches and the linear baseline against alpha at the chosen omega;
 *   - (b) the training losses of both branches against alpha;
 *   - (c) the phase diagram read off the grid (global minimum per grid cell, alpha_c, alpha_l) with the
 *     chosen point, alpha across (log scale) and omega up, as in the book's phase-diagram chapter;
 *   - (d) the attention maps of the teacher and of both students, on average and on two example inputs;
 *   - a readout table of the numbers at the chosen point.
 * Pages without such a div are left alone. Code: MIT licence, like the rest of the project's code.
 */
(function () {
  "use strict";

  var SVGNS = "http://www.w3.org/2000/svg";
  var BRANCHES = ["semantic", "positional"];
  var COLOUR = { semantic: "#1f77b4", positional: "#d62728", linear: "#444444" };
  var CELL = { semantic: "#c6dbef", positional: "#fcc5b4", none: "#eeeeee" };
  // PuOr (ColorBrewer, 11 classes), the diverging map of the book's attention figures: orange below 1/2, white at
  // 1/2 (no preference between the two tokens), purple above
  var PUOR = [[127, 59, 8], [179, 88, 6], [224, 130, 20], [253, 184, 99], [254, 224, 182], [247, 247, 247],
    [216, 218, 235], [178, 171, 210], [128, 115, 172], [84, 39, 136], [45, 0, 75]];
  var W = 400, H = 300;                        // every panel's viewBox
  var M = { left: 66, right: 12, top: 32, bottom: 48 };

  // SVG element; in text, "_x" (one character) is set as a subscript.
  function svgEl(tag, attrs, parent, text) {
    var e = document.createElementNS(SVGNS, tag);
    for (var k in attrs) { if (attrs[k] !== undefined && attrs[k] !== null) e.setAttribute(k, attrs[k]); }
    if (text !== undefined) {
      String(text).split(/(_.)/).forEach(function (part) {
        if (part.length === 2 && part[0] === "_") {
          var sub = document.createElementNS(SVGNS, "tspan");
          sub.setAttribute("baseline-shift", "sub");
          sub.setAttribute("font-size", "75%");
          sub.textContent = part[1];
          e.appendChild(sub);
        } else if (part) {
          e.appendChild(document.createTextNode(part));
        }
      });
    }
    if (parent) parent.appendChild(e);
    return e;
  }

  // HTML element; in text, "_x" (one character) is set as a subscript.
  function htmlSub(parent, text) {
    String(text).split(/(_.)/).forEach(function (part) {
      if (part.length === 2 && part[0] === "_") {
        var sub = document.createElement("sub");
        sub.textContent = part[1];
        parent.appendChild(sub);
      } else if (part) {
        parent.appendChild(document.createTextNode(part));
      }
    });
    return parent;
  }

  function htmlEl(tag, attrs, parent, text) {
    var e = document.createElement(tag);
    for (var k in attrs) { e.setAttribute(k, attrs[k]); }
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  function fmt(x, digits) {
    return (x === null || x === undefined) ? "\u2014" : Number(x).toPrecision(digits);
  }

  function puor(t) {
    t = Math.max(0, Math.min(1, t)) * (PUOR.length - 1);
    var i = Math.min(Math.floor(t), PUOR.length - 2), f = t - i, a = PUOR[i], b = PUOR[i + 1];
    return "rgb(" + [0, 1, 2].map(function (c) { return Math.round(a[c] + f * (b[c] - a[c])); }).join(",") + ")";
  }

  function niceTicks(lo, hi, n) {
    var step = Math.pow(10, Math.floor(Math.log10((hi - lo) / n)));
    var err = (hi - lo) / n / step;
    step *= err >= 5 ? 10 : err >= 2 ? 5 : err >= 1.5 ? 2 : 1;
    var out = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi + 1e-12; v += step) { out.push(Number(v.toPrecision(10))); }
    return out;
  }

  // An x-y panel: scales, axes, title; returns helpers to draw into it.
  function panel(svg, opts) {
    while (svg.firstChild) { svg.removeChild(svg.firstChild); }
    var x0 = M.left, x1 = W - M.right, y0 = H - M.bottom, y1 = M.top;
    var lx = opts.xlog ? Math.log : function (v) { return v; };
    var ly = opts.ylog ? Math.log : function (v) { return v; };
    var sx = function (v) { return x0 + (lx(v) - lx(opts.xlim[0])) / (lx(opts.xlim[1]) - lx(opts.xlim[0])) * (x1 - x0); };
    var sy = function (v) { return y0 - (ly(v) - ly(opts.ylim[0])) / (ly(opts.ylim[1]) - ly(opts.ylim[0])) * (y0 - y1); };
    svgEl("text", { x: 4, y: 17, "class": "ax-title" }, svg, opts.title);
    var axes = svgEl("g", { "class": "axes" }, svg);
    var plot = svgEl("g", { "class": "plot" }, svg);
    svgEl("rect", { x: x0, y: y1, width: x1 - x0, height: y0 - y1, "class": "frame" }, axes);
    opts.xticks.forEach(function (t) {
      svgEl("line", { x1: sx(t), x2: sx(t), y1: y0, y2: y0 + 4, "class": "tick" }, axes);
      svgEl("text", { x: sx(t), y: y0 + 19, "class": "tick-label", "text-anchor": "middle" }, axes, String(t));
    });
    opts.yticks.forEach(function (t) {
      svgEl("line", { x1: x0 - 4, x2: x0, y1: sy(t), y2: sy(t), "class": "tick" }, axes);
      svgEl("text", { x: x0 - 7, y: sy(t) + 4, "class": "tick-label", "text-anchor": "end" }, axes,
        opts.yfmt ? opts.yfmt(t) : String(t));
    });
    svgEl("text", { x: (x0 + x1) / 2, y: H - 8, "class": "ax-label", "text-anchor": "middle" }, axes, opts.xlabel);
    var yl = svgEl("text", { x: 0, y: 0, "class": "ax-label", "text-anchor": "middle",
      transform: "translate(13," + (y0 + y1) / 2 + ") rotate(-90)" }, axes, opts.ylabel);
    yl.setAttribute("data-axis", "y");
    return { sx: sx, sy: sy, plot: plot, x0: x0, x1: x1, y0: y0, y1: y1 };
  }

  // Polyline(s) through (xs[i], ys[i]) where ok[i]: one segment per run of consecutive valid points.
  function curve(p, xs, ys, ok, attrs) {
    var pts = [];
    function flush() {
      if (pts.length > 1) { svgEl("polyline", Object.assign({ points: pts.join(" "), fill: "none" }, attrs), p.plot); }
      pts = [];
    }
    for (var i = 0; i < xs.length; i++) {
      if (ok[i] && ys[i] !== null) { pts.push(p.sx(xs[i]).toFixed(2) + "," + p.sy(ys[i]).toFixed(2)); } else { flush(); }
    }
    flush();
  }

  function legend(p, entries, x, y, width) {
    var g = svgEl("g", { "class": "legend" }, p.plot);
    svgEl("rect", { x: x - 5, y: y - 10, width: width, height: 17 * entries.length + 3, "class": "legend-box" }, g);
    entries.forEach(function (e, k) {
      var yy = y + 17 * k;
      if (e.cell) {
        svgEl("rect", { x: x + 4, y: yy - 6, width: 12, height: 12, fill: e.cell, stroke: "#999" }, g);
      } else {
        svgEl("line", { x1: x, x2: x + 20, y1: yy, y2: yy, stroke: e.colour, "stroke-width": 2.2,
          "stroke-dasharray": e.dash || null }, g);
      }
      svgEl("text", { x: x + 25, y: yy + 4, "class": "legend-text" }, g, e.label);
    });
  }

  function Explorer(root) {
    var dataEl = root.querySelector("script.attnlib-explorer-data");
    var D = JSON.parse(dataEl.textContent);
    var fallback = root.querySelector(".attnlib-explorer-fallback");
    if (fallback) { fallback.parentNode.removeChild(fallback); }
    var state = { i: D.initial.omega_index, j: D.initial.alpha_index };

    // controls
    var controls = htmlEl("div", { "class": "controls" }, root);
    function slider(name, symbol, values, key) {
      var box = htmlEl("label", { "class": "control" }, controls);
      var out = htmlEl("span", { "class": "value", "data-value": name }, box);
      var input = htmlEl("input", { type: "range", min: 0, max: values.length - 1, step: 1,
        value: state[key], "aria-label": name, "data-slider": name }, box);
      input.addEventListener("input", function () { state[key] = Number(input.value); update(); });
      return function () { out.textContent = symbol + " = " + values[state[key]].toFixed(key === "i" ? 2 : 3); };
    }
    var showOmega = slider("omega", "\u03c9", D.omega, "i");
    var showAlpha = slider("alpha", "\u03b1", D.alpha, "j");

    var figs = htmlEl("div", { "class": "panels" }, root);
    var svgs = ["errors", "losses", "phase", "maps"].map(function (name) {
      return svgEl("svg", { viewBox: "0 0 " + W + " " + H, "class": "panel", "data-panel": name, role: "img" }, figs);
    });
    var readout = htmlEl("div", { "class": "readout" }, root);   // scrolls sideways on narrow screens

    function branchAt(b, key, i, j) { return D.branches[b][key][i][j]; }

    function alphaPanel(svg, key, title, ylabel, withLinear) {
      var i = state.i, a = D.alpha, ymax = 0;
      BRANCHES.forEach(function (b) {
        D.branches[b][key][i].forEach(function (v, j) { if (D.branches[b].exists[i][j] && v > ymax) { ymax = v; } });
      });
      if (withLinear) { ymax = Math.max(ymax, D.eps_lin[i]); }
      ymax = ymax > 0 ? ymax * 1.12 : 1;
      var yt = niceTicks(0, ymax, 4);
      var digits = Math.max(0, -Math.floor(Math.log10(yt.length > 1 ? yt[1] - yt[0] : ymax)));
      var p = panel(svg, { title: title, xlabel: "sample complexity \u03b1", ylabel: ylabel, xlog: true,
        xlim: [a[0], a[a.length - 1]], ylim: [0, ymax], xticks: [0.25, 0.5, 1, 2, 4], yticks: yt,
        yfmt: function (t) { return t.toFixed(digits); } });
      svgEl("line", { x1: p.sx(a[state.j]), x2: p.sx(a[state.j]), y1: p.y0, y2: p.y1, "class": "cursor" }, p.plot);
      var entries = [];
      BRANCHES.forEach(function (b) {
        curve(p, a, D.branches[b][key][i], D.branches[b].exists[i], { stroke: COLOUR[b], "stroke-width": 2.2,
          "data-curve": b });
        entries.push({ colour: COLOUR[b], label: b });
      });
      if (withLinear) {
        svgEl("line", { x1: p.x0, x2: p.x1, y1: p.sy(D.eps_lin[i]), y2: p.sy(D.eps_lin[i]), stroke: COLOUR.linear,
          "stroke-width": 1.6, "stroke-dasharray": "6 4", "data-curve": "linear" }, p.plot);
        entries.push({ colour: COLOUR.linear, label: "linear baseline", dash: "6 4" });
      }
      BRANCHES.forEach(function (b) {
        if (!D.branches[b].exists[i][state.j]) { return; }
        var glob = D.global[i][state.j] === b;
        svgEl("circle", { cx: p.sx(a[state.j]), cy: p.sy(branchAt(b, key, i, state.j)), r: 5,
          fill: glob ? COLOUR[b] : "white", stroke: COLOUR[b], "stroke-width": 2, "data-marker": b }, p.plot);
      });
      legend(p, entries, p.x1 - 148, p.y1 + 15, 144);
    }

    function phasePanel(svg) {
      // as in the book's phase diagram (chapter 6): alpha across (log scale), omega up
      var w = D.omega, a = D.alpha, dw = w[1] - w[0];
      var p = panel(svg, { title: "(c) phase diagram: global minimum", xlabel: "sample complexity \u03b1",
        ylabel: "positional weight \u03c9", xlog: true, xlim: [a[0], a[a.length - 1]],
        ylim: [w[0] - dw / 2, w[w.length - 1] + dw / 2], xticks: [0.25, 0.5, 1, 2, 4],
        yticks: niceTicks(w[0], w[w.length - 1], 5) });
      for (var i = 0; i < w.length; i++) {
        for (var j = 0; j < a.length; j++) {
          var lo = j === 0 ? a[0] : Math.sqrt(a[j - 1] * a[j]);
          var hi = j === a.length - 1 ? a[j] : Math.sqrt(a[j] * a[j + 1]);
          svgEl("rect", { x: p.sx(lo), y: p.sy(w[i] + dw / 2), width: p.sx(hi) - p.sx(lo) + 0.3,
            height: p.sy(w[i] - dw / 2) - p.sy(w[i] + dw / 2) + 0.3, fill: CELL[D.global[i][j] || "none"] }, p.plot);
        }
      }
      var okC = D.alpha_c.map(function (v) { return v !== null; });
      var okL = D.alpha_l.map(function (v) { return v !== null; });
      curve(p, D.alpha_c, w, okC, { stroke: "black", "stroke-width": 2, "data-curve": "alpha_c" });
      curve(p, D.alpha_l, w, okL, { stroke: "black", "stroke-width": 1.6, "stroke-dasharray": "2 3",
        "data-curve": "alpha_l" });
      var g = D.global[state.i][state.j];
      var cx = p.sx(a[state.j]), cy = p.sy(w[state.i]), star = [];
      for (var k = 0; k < 10; k++) {
        var r = k % 2 ? 4.5 : 11, t = -Math.PI / 2 + k * Math.PI / 5;
        star.push((cx + r * Math.cos(t)).toFixed(2) + "," + (cy + r * Math.sin(t)).toFixed(2));
      }
      svgEl("polygon", { points: star.join(" "), fill: g ? COLOUR[g] : "white", stroke: "black", "stroke-width": 1.2,
        "data-marker": "point", "data-omega": w[state.i], "data-alpha": a[state.j],
        "data-cx": cx.toFixed(2), "data-cy": cy.toFixed(2) }, p.plot);
      var x = p.x0 + 10, y = p.y1 + 14;       // upper left: positional everywhere on the grid
      legend(p, [{ colour: "black", label: "\u03b1_c (\u03b5_t equal)" },
        { colour: "black", label: "\u03b1_l (beats linear)", dash: "2 3" }, { label: "semantic", cell: CELL.semantic },
        { label: "positional", cell: CELL.positional }], x, y, 150);
    }

    function mapsPanel(svg) {
      while (svg.firstChild) { svg.removeChild(svg.firstChild); }
      svgEl("text", { x: 4, y: 17, "class": "ax-title" }, svg, "(d) attention maps, rows: query token");
      var i = state.i, j = state.j, cols = ["average input", "input 1", "input 2"];
      var ex = D.examples;
      var rows = [["teacher", D.teacher.mean[i], D.teacher.ex[i]]];
      BRANCHES.forEach(function (b) {
        rows.push([b + (D.global[i][j] === b ? " \u2605" : ""), D.branches[b].S_mean[i][j], D.branches[b].S_ex[i][j],
          D.branches[b].exists[i][j]]);
      });
      var cs = 31, x0 = 112, dx = 2 * cs + 22, y0 = 58, dy = 2 * cs + 10;
      cols.forEach(function (c, k) {
        svgEl("text", { x: x0 + k * dx + cs, y: y0 - 16, "class": "tick-label", "text-anchor": "middle" }, svg, c);
      });
      rows.forEach(function (row, r) {
        svgEl("text", { x: x0 - 8, y: y0 + r * dy + cs + 4, "class": "tick-label", "text-anchor": "end" }, svg, row[0]);
        var diags = [row[1]].concat(row[2]);
        diags.forEach(function (d, k) {
          var M2 = [[d[0], 1 - d[0]], [1 - d[1], d[1]]];
          for (var u = 0; u < 2; u++) {
            for (var v = 0; v < 2; v++) {
              var val = M2[u][v], x = x0 + k * dx + v * cs, y = y0 + r * dy + u * cs;
              svgEl("rect", { x: x, y: y, width: cs, height: cs, fill: puor((val - 0.2) / 0.6),
                opacity: row[3] === 0 ? 0.35 : 1, stroke: "white" }, svg);
              svgEl("text", { x: x + cs / 2, y: y + cs / 2 + 4, "text-anchor": "middle", "class": "cell-text",
                fill: Math.abs(val - 0.5) > 0.2 ? "white" : "black", "data-map": r + "," + k + "," + u + "," + v },
              svg, val.toFixed(2));
            }
          }
        });
      });
      svgEl("text", { x: 4, y: H - 24, "class": "note" }, svg, "inputs 1, 2: teacher's h* = \u221a\u03c1 (" +
        ex[0].join(", ") + "), \u221a\u03c1 (" + ex[1].join(", ") + ")");
      svgEl("text", { x: 4, y: H - 10, "class": "note" }, svg, "\u2605 global minimum; colour: 0.2 (orange) to 0.8 (purple)");
    }

    function readoutTable() {
      var i = state.i, j = state.j;
      readout.textContent = "";
      var t = htmlEl("table", { "class": "readout-table" }, readout);
      var head = htmlEl("tr", {}, htmlEl("thead", {}, t));
      ["", "test error \u03b5_g", "training loss \u03b5_t", "q", "m/\u03c3\u00b2", "\u03b8"].forEach(function (h) {
        htmlSub(htmlEl("th", {}, head), h);
      });
      var body = htmlEl("tbody", {}, t);
      BRANCHES.forEach(function (b) {
        var tr = htmlEl("tr", { "data-branch": b }, body), B = D.branches[b], ok = B.exists[i][j];
        var name = htmlEl("td", { "class": "name" }, tr);
        htmlEl("span", { "class": "swatch", style: "background:" + COLOUR[b] }, name);
        name.appendChild(document.createTextNode(" " + b + (D.global[i][j] === b ? " (global minimum)" : "")));
        var s2 = D.params.sigma * D.params.sigma;   // the book shows the positional overlap as m / sigma^2
        [["eps_g", 5], ["eps_t", 5], ["q", 4], ["m", 4], ["theta", 4]].forEach(function (kd) {
          var v = ok ? B[kd[0]][i][j] / (kd[0] === "m" ? s2 : 1) : null;
          htmlEl("td", { "data-key": b + "." + kd[0] }, tr, ok ? fmt(v, kd[1]) : "\u2014");
        });
        if (!ok) {
          tr.lastChild.textContent = B.converged[i][j] ? "no branch here" : "not converged";
        }
      });
      var lin = htmlEl("tr", { "data-branch": "linear" }, body);
      var name = htmlEl("td", { "class": "name" }, lin);
      htmlEl("span", { "class": "swatch", style: "background:" + COLOUR.linear }, name);
      name.appendChild(document.createTextNode(" linear baseline"));
      htmlEl("td", { "data-key": "linear.eps_lin" }, lin, fmt(D.eps_lin[i], 5));
      htmlEl("td", {}, lin, "");
      htmlEl("td", { colspan: 3 }, lin, "");
      var ac = D.alpha_c[i], al = D.alpha_l[i];
      htmlSub(htmlEl("p", { "class": "thresholds" }, readout),
        "At \u03c9 = " + D.omega[i].toFixed(2) + ": " + (ac === null ? "no \u03b1_c" : "\u03b1_c \u2248 " + ac.toFixed(3)) +
        ", " + (al === null ? "no \u03b1_l" : "\u03b1_l \u2248 " + al.toFixed(3)) +
        " on the grid (\u03b1 \u2264 " + D.alpha[D.alpha.length - 1] + ", read off by interpolation); \u03c3 = " +
        D.params.sigma + ", \u03bb = " + D.params.lam + ", standard A.");
    }

    function update() {
      showOmega();
      showAlpha();
      alphaPanel(svgs[0], "eps_g", "(a) test error \u03b5_g, \u03c9 = " + D.omega[state.i].toFixed(2), "\u03b5_g", true);
      alphaPanel(svgs[1], "eps_t", "(b) training loss \u03b5_t, \u03c9 = " + D.omega[state.i].toFixed(2), "\u03b5_t",
        false);
      phasePanel(svgs[2]);
      mapsPanel(svgs[3]);
      readoutTable();
      root.setAttribute("data-omega-index", state.i);
      root.setAttribute("data-alpha-index", state.j);
    }

    update();
    root.classList.add("ready");
  }

  function start() {
    var roots = document.querySelectorAll(".attnlib-explorer");
    for (var k = 0; k < roots.length; k++) {
      try {
        Explorer(roots[k]);
      } catch (err) {
        roots[k].classList.add("failed");
        htmlEl("p", { "class": "attnlib-explorer-error" }, roots[k], "The explorer could not start: " + err);
        throw err;
      }
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
