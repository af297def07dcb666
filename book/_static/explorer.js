/*
 * Static explorer of the book's chapter 8 (attnlib): plain JavaScript over SVG, no library, no network.
 *
 * The chapter's notebook output is a <div class="attnlib-explorer"> holding the precomputed grid as JSON
 * (<script type="application/json" class="attnlib-explorer-data">, written by attnlib.static_explorer). This
 * script, which jupyter-book loads on every page, finds such divs and draws in each:
 *   - two sliders, omega and alpha, over the grid values;
 *   - (a) the test errors of both branches and the linear baseline against alpha at the chosen omega;
 *   - (b) the training-loss gap eps_t(semantic) - eps_t(positional) against alpha (zero at alpha_c; its sign
 *     says which branch is the global minimum);
 *   - (c) the phase diagram: the global minimum per grid cell, with alpha_c, alpha_l and the ends of the two
 *     branches from the book's phase table (embedded with the grid, never read off it), and the chosen point;
 *     alpha across (log scale) and omega up, as in the book's phase-diagram chapter;
 *   - (d) the attention maps of the teacher and of both students, on average and on two example inputs;
 *   - a readout table of the numbers at the chosen point and the thresholds at the chosen omega.
 * A branch is drawn only where the embedded data say it exists (inside its range in the phase table).
 * Pages without such a div are left alone. Code: MIT licence, like the rest of the project's code.
 */
(function () {
  "use strict";

  var SVGNS = "http://www.w3.org/2000/svg";
  var BRANCHES = ["semantic", "positional"];
  var COLOUR = { semantic: "#1f77b4", positional: "#d62728", linear: "#444444", alpha_l: "#2ca02c", gap: "#222222" };
  var DASH = { alpha_l: "8 3 2 3", end: "6 4", linear: "6 4" };
  var CELL = { semantic: "#c6dbef", positional: "#fcc5b4", none: "#eeeeee" };
  // PuOr (ColorBrewer, 11 classes), the diverging map of the book's attention figures: orange below 1/2, white at
  // 1/2 (no preference between the two tokens), purple above
  var PUOR = [[127, 59, 8], [179, 88, 6], [224, 130, 20], [253, 184, 99], [254, 224, 182], [247, 247, 247],
    [216, 218, 235], [178, 171, 210], [128, 115, 172], [84, 39, 136], [45, 0, 75]];
  var W = 400, H = 300;                        // the viewBox of panels (a), (b); (c), (d) are taller (legend)
  var H_LOW = 385;
  var M = { left: 66, right: 12, top: 32, bottom: 48 };
  var SUPERSCRIPT = { "-": "\u207b", "0": "\u2070", "1": "\u00b9", "2": "\u00b2", "3": "\u00b3", "4": "\u2074",
    "5": "\u2075", "6": "\u2076", "7": "\u2077", "8": "\u2078", "9": "\u2079" };
  var uid = 0;                                 // unique ids of clip paths and patterns

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
    if (x === null || x === undefined) return "\u2014";
    return x === 0 ? "0" : Number(x).toPrecision(digits);   // an exact zero (a symmetry) is shown as 0
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

  // An x-y panel: scales, axes, title; returns helpers to draw into it. Curves go into "plot" (clipped to the
  // frame), markers, labels and legends into "top" (not clipped).
  function panel(svg, opts) {
    while (svg.firstChild) { svg.removeChild(svg.firstChild); }
    var h = opts.height || H;
    var x0 = M.left, x1 = W - M.right, y0 = M.top + (H - M.top - M.bottom), y1 = M.top;
    var lx = opts.xlog ? Math.log : function (v) { return v; };
    var ly = opts.ylog ? Math.log : function (v) { return v; };
    var sx = function (v) { return x0 + (lx(v) - lx(opts.xlim[0])) / (lx(opts.xlim[1]) - lx(opts.xlim[0])) * (x1 - x0); };
    var sy = function (v) { return y0 - (ly(v) - ly(opts.ylim[0])) / (ly(opts.ylim[1]) - ly(opts.ylim[0])) * (y0 - y1); };
    svgEl("text", { x: 4, y: 17, "class": "ax-title" }, svg, opts.title);
    var defs = svgEl("defs", {}, svg);
    var clipId = "attnlib-clip-" + (uid++);
    svgEl("rect", { x: x0, y: y1, width: x1 - x0, height: y0 - y1 }, svgEl("clipPath", { id: clipId }, defs));
    var axes = svgEl("g", { "class": "axes" }, svg);
    var plot = svgEl("g", { "class": "plot", "clip-path": "url(#" + clipId + ")" }, svg);
    var top = svgEl("g", { "class": "top" }, svg);
    svgEl("rect", { x: x0, y: y1, width: x1 - x0, height: y0 - y1, "class": "frame" }, top);
    opts.xticks.forEach(function (t) {
      svgEl("line", { x1: sx(t), x2: sx(t), y1: y0, y2: y0 + 4, "class": "tick" }, axes);
      svgEl("text", { x: sx(t), y: y0 + 19, "class": "tick-label", "text-anchor": "middle" }, axes, String(t));
    });
    opts.yticks.forEach(function (t) {
      svgEl("line", { x1: x0 - 4, x2: x0, y1: sy(t), y2: sy(t), "class": "tick" }, axes);
      svgEl("text", { x: x0 - 7, y: sy(t) + 4, "class": "tick-label", "text-anchor": "end" }, axes,
        opts.yfmt ? opts.yfmt(t) : String(t));
    });
    svgEl("text", { x: (x0 + x1) / 2, y: y0 + 40, "class": "ax-label", "text-anchor": "middle" }, axes, opts.xlabel);
    var yl = svgEl("text", { x: 0, y: 0, "class": "ax-label", "text-anchor": "middle",
      transform: "translate(13," + (y0 + y1) / 2 + ") rotate(-90)" }, axes, opts.ylabel);
    yl.setAttribute("data-axis", "y");
    return { sx: sx, sy: sy, plot: plot, top: top, defs: defs, x0: x0, x1: x1, y0: y0, y1: y1, height: h };
  }

  // A vertical line at x (if not null) across the frame, labelled at its top (to the left or right of it).
  function vline(p, x, attrs, label, side) {
    if (x === null || x === undefined) { return; }
    var X = p.sx(x);
    if (X < p.x0 || X > p.x1) { return; }
    svgEl("line", Object.assign({ x1: X, x2: X, y1: p.y0, y2: p.y1 }, attrs), p.plot);
    svgEl("text", { x: X + (side === "left" ? -4 : 4), y: p.y1 + 15, "class": "line-label",
      "text-anchor": side === "left" ? "end" : "start", fill: attrs.stroke, "data-label": attrs["data-curve"] },
    p.top, label);
  }

  // 10^e as text: "10" followed by the superscript digits of e.
  function powerOfTen(e) {
    return "10" + String(e).split("").map(function (c) { return SUPERSCRIPT[c]; }).join("");
  }

  // Polyline(s) through (xs[i], ys[i]) where ok[i]: one segment per run of consecutive valid points (with
  // bridge, one polyline through all valid points, across the gaps).
  function curve(p, xs, ys, ok, attrs, bridge) {
    var pts = [];
    function flush() {
      if (pts.length > 1) { svgEl("polyline", Object.assign({ points: pts.join(" "), fill: "none" }, attrs), p.plot); }
      pts = [];
    }
    for (var i = 0; i < xs.length; i++) {
      if (ok[i] && ys[i] !== null) {
        pts.push(p.sx(xs[i]).toFixed(2) + "," + p.sy(ys[i]).toFixed(2));
      } else if (!bridge) {
        flush();
      }
    }
    flush();
  }

  function legend(p, entries, x, y, width, nobox) {
    var g = svgEl("g", { "class": "legend" }, p.top);
    if (!nobox) {
      svgEl("rect", { x: x - 5, y: y - 10, width: width, height: 17 * entries.length + 3, "class": "legend-box" }, g);
    }
    entries.forEach(function (e, k) {
      var yy = y + 17 * k;
      if (e.cell) {
        svgEl("rect", { x: x + 4, y: yy - 6, width: 12, height: 12, fill: e.cell, stroke: "#999" }, g);
      } else {
        svgEl("line", { x1: x, x2: x + 20, y1: yy, y2: yy, stroke: e.colour, "stroke-width": e.width || 2.2,
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
    var svgs = [["errors", H], ["gap", H], ["phase", H_LOW], ["maps", H_LOW]].map(function (nh) {
      return svgEl("svg", { viewBox: "0 0 " + W + " " + nh[1], "class": "panel", "data-panel": nh[0], role: "img" },
        figs);
    });
    var readout = htmlEl("div", { "class": "readout" }, root);   // scrolls sideways on narrow screens
    var XTICKS = [0.25, 0.5, 1, 2, 4];

    function branchAt(b, key, i, j) { return D.branches[b][key][i][j]; }
    function both(i, j) { return D.branches.semantic.exists[i][j] && D.branches.positional.exists[i][j]; }
    function gapAt(i, j) {
      return both(i, j) ? branchAt("semantic", "eps_t", i, j) - branchAt("positional", "eps_t", i, j) : null;
    }

    // alpha_c (black) and alpha_l (green, dash-dot) of the phase table at the chosen omega, as vertical lines
    function thresholdLines(p, withL) {
      var i = state.i;
      vline(p, D.alpha_c[i], { stroke: "black", "stroke-width": 1.4, "data-curve": "alpha_c" }, "\u03b1_c", "left");
      if (withL) {
        vline(p, D.alpha_l[i], { stroke: COLOUR.alpha_l, "stroke-width": 1.6, "stroke-dasharray": DASH.alpha_l,
          "data-curve": "alpha_l" }, "\u03b1_l", "right");
      }
    }

    function cursor(p) {
      svgEl("line", { x1: p.sx(D.alpha[state.j]), x2: p.sx(D.alpha[state.j]), y1: p.y0, y2: p.y1, "class": "cursor" },
        p.plot);
    }

    function errorPanel(svg) {
      var i = state.i, a = D.alpha, ymax = D.eps_lin[i];
      BRANCHES.forEach(function (b) {
        D.branches[b].eps_g[i].forEach(function (v, j) { if (D.branches[b].exists[i][j] && v > ymax) { ymax = v; } });
      });
      ymax = ymax > 0 ? ymax * 1.12 : 1;
      var yt = niceTicks(0, ymax, 4);
      var digits = Math.max(0, -Math.floor(Math.log10(yt.length > 1 ? yt[1] - yt[0] : ymax)));
      var p = panel(svg, { title: "(a) test error \u03b5_g, \u03c9 = " + D.omega[i].toFixed(2),
        xlabel: "sample complexity \u03b1", ylabel: "\u03b5_g", xlog: true, xlim: [a[0], a[a.length - 1]],
        ylim: [0, ymax], xticks: XTICKS, yticks: yt, yfmt: function (t) { return t.toFixed(digits); } });
      cursor(p);
      thresholdLines(p, true);
      svgEl("line", { x1: p.x0, x2: p.x1, y1: p.sy(D.eps_lin[i]), y2: p.sy(D.eps_lin[i]), stroke: COLOUR.linear,
        "stroke-width": 1.6, "stroke-dasharray": DASH.linear, "data-curve": "linear" }, p.plot);
      BRANCHES.forEach(function (b) {
        curve(p, a, D.branches[b].eps_g[i], D.branches[b].exists[i], { stroke: COLOUR[b], "stroke-width": 2.2,
          "data-curve": b });
      });
      BRANCHES.forEach(function (b) {
        if (!D.branches[b].exists[i][state.j]) { return; }
        var glob = D.global[i][state.j] === b;
        svgEl("circle", { cx: p.sx(a[state.j]), cy: p.sy(branchAt(b, "eps_g", i, state.j)), r: 5,
          fill: glob ? COLOUR[b] : "white", stroke: COLOUR[b], "stroke-width": 2, "data-marker": b }, p.top);
      });
      // lower left: at small alpha both errors are large, so this corner stays free
      legend(p, [{ colour: COLOUR.semantic, label: "semantic" }, { colour: COLOUR.positional, label: "positional" },
        { colour: COLOUR.linear, label: "linear baseline", dash: DASH.linear }], p.x0 + 10, p.y0 - 46, 144);
    }

    function gapPanel(svg) {
      var i = state.i, a = D.alpha, hi = 0, lo = 0;
      var gaps = a.map(function (_, j) { return gapAt(i, j); });
      gaps.forEach(function (g) { if (g !== null) { hi = Math.max(hi, g); lo = Math.min(lo, g); } });
      // the gap grows fast away from alpha_c: keep the larger side within twice the smaller one, so that the
      // zero crossing stays readable (the curve leaves the frame beyond)
      if (hi > 0 && lo < 0) { var h0 = hi, l0 = -lo; hi = Math.min(h0, 2 * l0); lo = -Math.min(l0, 2 * h0); }
      if (hi === 0 && lo === 0) { hi = 1e-4; lo = -1e-4; }
      var pad = 0.1 * (hi - lo);
      hi += pad; lo -= pad;
      var e = Math.floor(Math.log10(Math.max(hi, -lo))), scale = Math.pow(10, e);
      var yt = niceTicks(lo / scale, hi / scale, 5);
      var digits = Math.max(0, -Math.floor(Math.log10(yt.length > 1 ? yt[1] - yt[0] : 1)));
      var p = panel(svg, { title: "(b) \u0394\u03b5_t = \u03b5_t(semantic) \u2212 \u03b5_t(positional)",
        xlabel: "sample complexity \u03b1", ylabel: "\u0394\u03b5_t (\u00d7" + powerOfTen(e) + ")", xlog: true,
        xlim: [a[0], a[a.length - 1]], ylim: [lo, hi], xticks: XTICKS,
        yticks: yt.map(function (t) { return t * scale; }),
        yfmt: function (t) {
          var v = t / scale;
          return (Math.abs(v) < 1e-9 ? 0 : v).toFixed(digits).replace("-", "\u2212");
        } });
      cursor(p);
      svgEl("line", { x1: p.x0, x2: p.x1, y1: p.sy(0), y2: p.sy(0), stroke: "#888", "stroke-width": 1,
        "data-curve": "zero" }, p.plot);
      thresholdLines(p, false);
      curve(p, a, gaps, gaps.map(function (g) { return g !== null; }), { stroke: COLOUR.gap, "stroke-width": 2.2,
        "data-curve": "gap" });
      svgEl("text", { x: p.x1 - 6, y: p.sy(0) - 6, "class": "line-label", "text-anchor": "end",
        fill: COLOUR.positional }, p.top, "positional lower \u2191");
      svgEl("text", { x: p.x1 - 6, y: p.sy(0) + 16, "class": "line-label", "text-anchor": "end",
        fill: COLOUR.semantic }, p.top, "semantic lower \u2193");
      var g = gaps[state.j];
      if (g !== null) {
        var cy = p.sy(g), off = cy < p.y1 || cy > p.y0;
        var glob = D.global[i][state.j];
        cy = Math.max(p.y1, Math.min(p.y0, cy));
        var cx = p.sx(a[state.j]), attrs = { fill: glob ? COLOUR[glob] : "white", stroke: COLOUR.gap,
          "stroke-width": 1.5, "data-marker": "gap", "data-off-scale": off ? 1 : 0 };
        if (off) {            // a triangle on the frame, pointing the way the value lies
          var d = cy <= p.y1 ? -1 : 1;
          attrs.points = [cx - 6, cy - 8 * d, cx + 6, cy - 8 * d, cx, cy].join(",");
          svgEl("polygon", attrs, p.top);
        } else {
          attrs.cx = cx; attrs.cy = cy; attrs.r = 5;
          svgEl("circle", attrs, p.top);
        }
      } else {
        svgEl("text", { x: (p.x0 + p.x1) / 2, y: p.y1 + 40, "class": "note", "text-anchor": "middle" }, p.top,
          "one branch only at this \u03b1: no gap");
      }
    }

    function phasePanel(svg) {
      // as in the book's phase diagram (chapter 6): alpha across (log scale), omega up; lines from the phase table
      var w = D.omega, a = D.alpha, dw = w.length > 1 ? w[1] - w[0] : 0.05;
      var p = panel(svg, { title: "(c) phase diagram: global minimum", xlabel: "sample complexity \u03b1",
        ylabel: "positional weight \u03c9", xlog: true, xlim: [a[0], a[a.length - 1]], height: H_LOW,
        ylim: [w[0] - dw / 2, w[w.length - 1] + dw / 2], xticks: XTICKS,
        yticks: niceTicks(w[0], w[w.length - 1], 5) });
      for (var i = 0; i < w.length; i++) {
        for (var j = 0; j < a.length; j++) {
          var lo = j === 0 ? a[0] : Math.sqrt(a[j - 1] * a[j]);
          var hi = j === a.length - 1 ? a[j] : Math.sqrt(a[j] * a[j + 1]);
          svgEl("rect", { x: p.sx(lo), y: p.sy(w[i] + dw / 2), width: p.sx(hi) - p.sx(lo) + 0.3,
            height: p.sy(w[i] - dw / 2) - p.sy(w[i] + dw / 2) + 0.3, fill: CELL[D.global[i][j] || "none"] }, p.plot);
        }
      }
      // where both branches exist (between the semantic end and the positional end, or the right edge)
      var hatchId = "attnlib-hatch-" + (uid++);
      var pat = svgEl("pattern", { id: hatchId, width: 7, height: 7, patternUnits: "userSpaceOnUse",
        patternTransform: "rotate(45)" }, p.defs);
      svgEl("line", { x1: 0, x2: 0, y1: 0, y2: 7, stroke: "#555", "stroke-width": 1.3, "stroke-opacity": 0.55 }, pat);
      var left = [], right = [];
      function flushRegion() {
        if (left.length > 1) {
          svgEl("polygon", { points: left.concat(right.reverse()).join(" "), fill: "url(#" + hatchId + ")",
            "data-region": "both" }, p.plot);
        }
        left = []; right = [];
      }
      for (var k = 0; k < w.length; k++) {
        var se = D.semantic_end[k], pe = D.positional_end[k];
        if (se === null) { flushRegion(); continue; }
        var r = pe === null ? a[a.length - 1] * 2 : Math.max(pe, se);
        left.push(p.sx(Math.max(se, a[0] / 2)).toFixed(2) + "," + p.sy(w[k]).toFixed(2));
        right.push(p.sx(r).toFixed(2) + "," + p.sy(w[k]).toFixed(2));
      }
      flushRegion();
      var ok = function (arr) { return arr.map(function (v) { return v !== null; }); };
      curve(p, D.semantic_end, w, ok(D.semantic_end), { stroke: COLOUR.semantic, "stroke-width": 2,
        "stroke-dasharray": DASH.end, "data-curve": "semantic_end" });
      // the positional branch ends (fold, vanishing, or lost) at some omegas only: as in chapter 6, one line through
      // those rows, and a dot at each (an end at a single row is seen too)
      curve(p, D.positional_end, w, ok(D.positional_end), { stroke: COLOUR.positional, "stroke-width": 2,
        "stroke-dasharray": DASH.end, "data-curve": "positional_end" }, true);
      D.positional_end.forEach(function (v, k) {
        if (v !== null) {
          svgEl("circle", { cx: p.sx(v), cy: p.sy(w[k]), r: 3, fill: COLOUR.positional, "data-end": "positional" },
            p.plot);
        }
      });
      curve(p, D.alpha_c, w, ok(D.alpha_c), { stroke: "black", "stroke-width": 2, "data-curve": "alpha_c" });
      curve(p, D.alpha_l, w, ok(D.alpha_l), { stroke: COLOUR.alpha_l, "stroke-width": 2,
        "stroke-dasharray": DASH.alpha_l, "data-curve": "alpha_l" });
      var g = D.global[state.i][state.j];
      var cx = p.sx(a[state.j]), cy = p.sy(w[state.i]), star = [];
      for (var s = 0; s < 10; s++) {
        var rr = s % 2 ? 4.5 : 11, t = -Math.PI / 2 + s * Math.PI / 5;
        star.push((cx + rr * Math.cos(t)).toFixed(2) + "," + (cy + rr * Math.sin(t)).toFixed(2));
      }
      svgEl("polygon", { points: star.join(" "), fill: g ? COLOUR[g] : "white", stroke: "black", "stroke-width": 1.2,
        "data-marker": "point", "data-omega": w[state.i], "data-alpha": a[state.j],
        "data-cx": cx.toFixed(2), "data-cy": cy.toFixed(2) }, p.top);
      // legend below the axes, in two columns
      var y = p.y0 + 66;
      legend(p, [{ colour: "black", label: "\u03b1_c (equal \u03b5_t)", width: 2 },
        { colour: COLOUR.alpha_l, label: "\u03b1_l (beats linear)", dash: DASH.alpha_l, width: 2 },
        { colour: COLOUR.semantic, label: "semantic branch ends", dash: DASH.end, width: 2 },
        { colour: COLOUR.positional, label: "positional branch ends", dash: DASH.end, width: 2 }], 14, y, 0, true);
      legend(p, [{ label: "both branches exist", cell: "url(#" + hatchId + ")" },
        { label: "global min.: semantic", cell: CELL.semantic },
        { label: "global min.: positional", cell: CELL.positional }], 214, y, 0, true);
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
      var cs = 35, x0 = 112, dx = 2 * cs + 20, y0 = 62, dy = 2 * cs + 16;
      cols.forEach(function (c, k) {
        svgEl("text", { x: x0 + k * dx + cs, y: y0 - 14, "class": "tick-label", "text-anchor": "middle" }, svg, c);
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
      svgEl("text", { x: 4, y: H_LOW - 40, "class": "note" }, svg, "inputs 1, 2: teacher's h* = \u221a\u03c1 (" +
        ex[0].join(", ") + "), \u221a\u03c1 (" + ex[1].join(", ") + ")");
      svgEl("text", { x: 4, y: H_LOW - 24, "class": "note" }, svg, "\u2605 global minimum; faded: no branch here");
      svgEl("text", { x: 4, y: H_LOW - 8, "class": "note" }, svg, "colour: 0.2 (orange) to 0.8 (purple)");
    }

    function readoutTable() {
      var i = state.i, j = state.j;
      readout.textContent = "";
      var t = htmlEl("table", { "class": "readout-table" }, readout);
      var head = htmlEl("tr", {}, htmlEl("thead", {}, t));
      ["", "test error \u03b5_g", "training loss \u03b5_t", "q", "m/\u03c3\u00b2", "\u03b8/\u03c3\u00b2"].forEach(function (h) {
        htmlSub(htmlEl("th", {}, head), h);
      });
      var body = htmlEl("tbody", {}, t);
      BRANCHES.forEach(function (b) {
        var tr = htmlEl("tr", { "data-branch": b }, body), B = D.branches[b], ok = B.exists[i][j];
        var name = htmlEl("td", { "class": "name" }, tr);
        htmlEl("span", { "class": "swatch", style: "background:" + COLOUR[b] }, name);
        name.appendChild(document.createTextNode(" " + b));
        if (D.global[i][j] === b) { htmlEl("span", { "class": "global-tag" }, name, " global minimum"); }
        var s2 = D.params.sigma * D.params.sigma;   // the book shows the overlaps as m / sigma^2, theta / sigma^2
        [["eps_g", 4], ["eps_t", 4], ["q", 4], ["m", 4], ["theta", 4]].forEach(function (kd) {   // significant digits
          var v = ok ? B[kd[0]][i][j] / (kd[0] === "m" || kd[0] === "theta" ? s2 : 1) : null;
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
      htmlEl("td", { "data-key": "linear.eps_lin" }, lin, fmt(D.eps_lin[i], 4));
      htmlEl("td", {}, lin, "");
      htmlEl("td", { colspan: 3 }, lin, "");
      // the thresholds and ends at this omega, from the phase table
      var par = htmlEl("p", { "class": "thresholds" }, readout);
      function num(key, digits) {
        var v = D[key][i];
        htmlEl("span", { "data-key": "table." + key }, par, v === null ? "\u2014" : v.toFixed(digits));
      }
      function txt(s) { htmlSub(par, s); }
      txt("At \u03c9 = " + D.omega[i].toFixed(2) + ", from the phase table: \u03b1_c = ");
      num("alpha_c", 3);
      txt(", \u03b1_l = ");
      num("alpha_l", 3);
      txt("; the semantic branch exists for \u03b1 \u2265 ");
      num("semantic_end", 3);
      if (D.positional_end[i] === null) {
        txt(", the positional branch throughout the grid");
      } else {
        txt(", the positional branch for \u03b1 \u2264 ");
        num("positional_end", 3);
      }
      txt(". \u03c3 = " + D.params.sigma + ", \u03bb = " + D.params.lam + ", standard A.");
    }

    function update() {
      showOmega();
      showAlpha();
      errorPanel(svgs[0]);
      gapPanel(svgs[1]);
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
