// The console's charts: line charts through uPlot (vendor/), scatter and parallel coordinates
// on a plain 2D canvas (no WebGL), importance as bars. Each [data-chart] element names its
// kind and the JSON it draws; all of them redraw when the page hears that the store changed.
(function () {
  "use strict";
  const PALETTE = ["#2f6fed", "#e8590c", "#12b76a", "#7a5af8", "#f04438", "#0ba5ec",
                   "#dc6803", "#66c61c", "#ee46bc", "#475467"];
  const STATUS_COLOUR = { Completed: "#12b76a", Stopped: "#f79009", Failed: "#f04438",
                          InProgress: "#2f6fed", Paused: "#7a5af8", Pending: "#98a2b3" };
  const HEIGHT = 280;
  const REDRAW_MS = 2000;

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    Object.entries(attrs || {}).forEach(([k, v]) => node.setAttribute(k, v));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function widthOf(node) { return Math.max(280, Math.floor(node.clientWidth || 520) - 8); }

  function fmt(v) {
    if (v === null || v === undefined || Number.isNaN(v)) return "–";
    const a = Math.abs(v);
    return (a !== 0 && (a < 1e-3 || a >= 1e5)) ? v.toExponential(2) : +v.toPrecision(4) + "";
  }

  // -- uPlot line charts ------------------------------------------------------------------
  function lineChart(node, title, xs, series, opts) {
    opts = opts || {};
    const uopts = {
      title: title, width: widthOf(node), height: HEIGHT,
      scales: { x: { time: false } },
      legend: { show: series.length <= 12 },
      cursor: { drag: { x: true, y: false } },
      axes: [{ label: opts.xLabel || "step" }, { label: opts.yLabel || "", size: 60 }],
      series: [{ label: opts.xLabel || "step" }].concat(series.map((s, i) => ({
        label: s.label, stroke: s.colour || PALETTE[i % PALETTE.length], width: s.width || 1.5,
        spanGaps: true, points: { show: xs.length < 40 }, paths: opts.paths,
      }))),
      hooks: opts.hooks || {},
    };
    return new uPlot(uopts, [xs].concat(series.map(s => s.values)), node);
  }

  function rungLines(rungs) {
    return { draw: [function (u) {
      const ctx = u.ctx;
      ctx.save();
      ctx.strokeStyle = "rgba(102,112,133,0.55)";
      ctx.setLineDash([4, 4]);
      ctx.lineWidth = 1;
      rungs.forEach(function (r) {
        const x = u.valToPos(r, "x", true);
        if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) return;
        ctx.beginPath(); ctx.moveTo(x, u.bbox.top); ctx.lineTo(x, u.bbox.top + u.bbox.height); ctx.stroke();
      });
      ctx.restore();
    }] };
  }

  // -- canvas charts ----------------------------------------------------------------------
  function canvasFor(node, height) {
    const canvas = el("canvas", { class: "plot" });
    const ratio = window.devicePixelRatio || 1;
    const w = widthOf(node), h = height || HEIGHT;
    canvas.width = w * ratio; canvas.height = h * ratio;
    canvas.style.width = w + "px"; canvas.style.height = h + "px";
    node.appendChild(canvas);
    const ctx = canvas.getContext("2d");
    ctx.scale(ratio, ratio);
    ctx.font = "11px system-ui, sans-serif";
    return { canvas: canvas, ctx: ctx, w: w, h: h };
  }

  function extent(values, log) {
    const v = values.filter(x => x !== null && Number.isFinite(x) && (!log || x > 0));
    if (!v.length) return [0, 1];
    let lo = Math.min(...v), hi = Math.max(...v);
    if (lo === hi) { lo -= 0.5; hi += 0.5; }
    return [lo, hi];
  }

  function scaler(lo, hi, from, to, log) {
    if (log) { const a = Math.log(lo), b = Math.log(hi); return v => from + (Math.log(v) - a) / (b - a) * (to - from); }
    return v => from + (v - lo) / (hi - lo) * (to - from);
  }

  function scatter(node, points, xLabel, yLabel, yKey) {
    const c = canvasFor(node);
    const ctx = c.ctx, pad = { l: 56, r: 12, t: 12, b: 34 };
    const xs = points.map(p => p.x), ys = points.map(p => p[yKey || "y"]);
    const [x0, x1] = extent(xs), [y0, y1] = extent(ys);
    const sx = scaler(x0, x1, pad.l, c.w - pad.r), sy = scaler(y0, y1, c.h - pad.b, pad.t);
    axes(ctx, c, pad, [x0, x1], [y0, y1], xLabel, yLabel);
    ctx.globalAlpha = points.length > 2000 ? 0.35 : 0.75;
    points.forEach(function (p) {
      const y = p[yKey || "y"];
      if (p.x === null || y === null) return;
      const jitter = (Math.random() - 0.5) * Math.min(8, (c.w - pad.l - pad.r) / Math.max(1, (x1 - x0)) / 4);
      ctx.fillStyle = STATUS_COLOUR[p.status] || "#475467";
      ctx.beginPath(); ctx.arc(sx(p.x) + jitter, sy(y), 2.5, 0, 2 * Math.PI); ctx.fill();
    });
    ctx.globalAlpha = 1;
    legend(node, Array.from(new Set(points.map(p => p.status))));
    return c;
  }

  function axes(ctx, c, pad, xr, yr, xLabel, yLabel) {
    ctx.strokeStyle = "#d0d5dd"; ctx.fillStyle = "#667085"; ctx.lineWidth = 1;
    ctx.beginPath();
    ctx.moveTo(pad.l, pad.t); ctx.lineTo(pad.l, c.h - pad.b); ctx.lineTo(c.w - pad.r, c.h - pad.b);
    ctx.stroke();
    ctx.textAlign = "right";
    [0, 0.5, 1].forEach(function (f) {
      const v = yr[0] + f * (yr[1] - yr[0]);
      const y = c.h - pad.b - f * (c.h - pad.b - pad.t);
      ctx.fillText(fmt(v), pad.l - 4, y + 4);
    });
    ctx.textAlign = "center";
    [0, 0.5, 1].forEach(function (f) {
      const v = xr[0] + f * (xr[1] - xr[0]);
      ctx.fillText(fmt(v), pad.l + f * (c.w - pad.l - pad.r), c.h - pad.b + 14);
    });
    ctx.fillText(xLabel, pad.l + (c.w - pad.l - pad.r) / 2, c.h - 4);
    ctx.save(); ctx.translate(12, pad.t + (c.h - pad.b - pad.t) / 2); ctx.rotate(-Math.PI / 2);
    ctx.fillText(yLabel, 0, 0); ctx.restore();
  }

  function legend(node, statuses) {
    const list = el("p", { class: "small muted" });
    statuses.forEach(function (s) {
      const dot = el("span", {}, "● ");
      dot.style.color = STATUS_COLOUR[s] || "#475467";
      list.appendChild(dot); list.appendChild(document.createTextNode(s + "  "));
    });
    node.appendChild(list);
  }

  function parallel(node, data) {
    const axesData = data.axes;
    const c = canvasFor(node, 300);
    const ctx = c.ctx, pad = { l: 30, r: 30, t: 36, b: 22 };
    const n = axesData.length;
    if (!data.count) { node.appendChild(el("p", { class: "muted" }, "No trial has an objective yet.")); return; }
    const xAt = i => pad.l + i * (c.w - pad.l - pad.r) / Math.max(1, n - 1);
    const scales = axesData.map(function (a) {
      if (a.labels) return v => (v === null ? null : c.h - pad.b - (v + 0.5) / a.labels.length * (c.h - pad.b - pad.t));
      const [lo, hi] = extent(a.values, a.log);
      const s = scaler(lo, hi, c.h - pad.b, pad.t, a.log);
      return v => (v === null || !Number.isFinite(v) || (a.log && v <= 0) ? null : s(v));
    });
    const objective = axesData[n - 1].values;
    const [o0, o1] = extent(objective);
    const order = objective.map((v, i) => i).sort((i, j) =>
      data.maximize ? objective[i] - objective[j] : objective[j] - objective[i]);  // best drawn last
    ctx.lineWidth = 1;
    const alpha = objective.length > 2000 ? 0.08 : objective.length > 300 ? 0.2 : 0.5;
    order.forEach(function (row) {
      let quality = (objective[row] - o0) / (o1 - o0 || 1);
      if (!data.maximize) quality = 1 - quality;
      ctx.strokeStyle = "rgba(" + Math.round(200 - 170 * quality) + "," + Math.round(210 - 100 * quality) + "," + Math.round(240 - 3 * quality) + "," + (alpha + 0.5 * quality * (1 - alpha)) + ")";
      ctx.beginPath();
      let started = false;
      axesData.forEach(function (a, i) {
        const y = scales[i](a.values[row]);
        if (y === null) { started = false; return; }
        if (!started) { ctx.moveTo(xAt(i), y); started = true; } else { ctx.lineTo(xAt(i), y); }
      });
      ctx.stroke();
    });
    ctx.fillStyle = "#1d2430"; ctx.strokeStyle = "#98a2b3"; ctx.textAlign = "center";
    axesData.forEach(function (a, i) {
      ctx.beginPath(); ctx.moveTo(xAt(i), pad.t); ctx.lineTo(xAt(i), c.h - pad.b); ctx.stroke();
      ctx.fillText(a.name, xAt(i), 14);
      if (a.labels) {
        a.labels.forEach((label, k) => ctx.fillText(label, xAt(i), scales[i](k) + 4));
      } else {
        const [lo, hi] = extent(a.values, a.log);
        ctx.fillText(fmt(hi), xAt(i), pad.t - 6);
        ctx.fillText(fmt(lo), xAt(i), c.h - 6);
      }
    });
  }

  function importance(node, data) {
    if (!Object.keys(data.importances).length) {
      node.appendChild(el("p", { class: "muted" }, "Not enough trials yet: " + (data.note || "")));
      return;
    }
    const list = el("ul", { class: "bars" });
    Object.entries(data.importances).forEach(function ([name, share]) {
      const item = el("li");
      item.appendChild(el("span", {}, name));
      const bar = el("span", { class: "bar", role: "img", "aria-label": name + " " + fmt(share) });
      bar.style.width = Math.max(1, Math.round(share * 100)) + "%";
      const track = el("span"); track.appendChild(bar);
      item.appendChild(track);
      item.appendChild(el("span", { class: "value" }, (share * 100).toFixed(1) + " %"));
      list.appendChild(item);
    });
    node.appendChild(list);
    node.appendChild(el("p", { class: "small muted" },
      data.trials + " trials compared at resource " + data.resource + (data.note ? " (" + data.note + ")" : "")));
  }

  // -- drawing each kind ------------------------------------------------------------------
  const DRAW = {
    "job-metrics": function (node, data) {
      const names = Object.keys(data.metrics);
      if (!names.length) { node.appendChild(el("p", { class: "muted" }, "No metrics reported yet.")); return; }
      let points = 0;
      names.forEach(function (name) {
        const panel = el("div", { class: "panel" }); node.appendChild(panel);
        const m = data.metrics[name];
        points += m.steps.length;
        lineChart(panel, name, m.steps, [{ label: name, values: m.values }], { yLabel: name });
      });
      node.dataset.points = String(points);  // what is drawn, for tests and curious readers
      if (data.sizes) {  // an elastic job: its workers over time, a step at each resize
        const panel = el("div", { class: "panel", "data-panel": "workers" }); node.appendChild(panel);
        lineChart(panel, "workers", data.sizes.seconds, [{ label: "workers", values: data.sizes.workers, width: 2 }],
          { xLabel: "seconds since the job started", yLabel: "workers", paths: uPlot.paths.stepped({ align: 1 }) });
      }
    },
    "compare": function (node, data) {
      Object.entries(data.metrics).forEach(function ([name, m]) {
        const panel = el("div", { class: "panel" }); node.appendChild(panel);
        lineChart(panel, name, m.steps, m.series, { yLabel: name });
      });
    },
    "curves": function (node, data) {
      const d = data.curves;
      if (!d.series.length) { node.appendChild(el("p", { class: "muted" }, "No trial has reported " + d.metric + " yet.")); return; }
      const series = d.series.map((s, i) => ({ label: s.label, values: s.values,
        colour: i === 0 ? "#101828" : (STATUS_COLOUR[s.status] || PALETTE[i % PALETTE.length]), width: i === 0 ? 2.5 : 1 }));
      lineChart(node, "", d.steps, series, { yLabel: d.metric, xLabel: "resource", hooks: rungLines(d.rungs) });
    },
    "stops": function (node, data) {
      if (!data.stops.points.length) { node.appendChild(el("p", { class: "muted" }, "No trial has ended yet.")); return; }
      scatter(node, data.stops.points, "resource reached", data.stops.metric);
    },
    "best": function (node, data) {
      const d = data.best;
      if (!d.billable_seconds.length) { node.appendChild(el("p", { class: "muted" }, "No trial has ended yet.")); return; }
      lineChart(node, "", d.billable_seconds, [{ label: "best " + d.metric, values: d.best, width: 2 }],
        { xLabel: "billable worker-seconds", yLabel: d.metric, paths: uPlot.paths.stepped({ align: 1 }) });
    },
    "parallel": function (node, data) { parallel(node, data.parallel); },
    "importance": importance,
    "cluster": function (node, data) {
      if (!data.cluster) { node.appendChild(el("p", { class: "muted" }, "Every trial ran on one cluster size.")); return; }
      scatter(node, data.cluster.points, "workers", data.cluster.metric);
      scatter(node, data.cluster.points, "workers", "billable worker-seconds", "cost");
    },
  };

  let fetches = {};

  function load(node) {
    const src = node.dataset.src;
    if (!fetches[src]) {
      fetches[src] = fetch(src, { headers: { Accept: "application/json" } }).then(function (r) {
        if (!r.ok) return r.json().catch(() => ({})).then(b => { throw new Error(b.error || ("HTTP " + r.status)); });
        return r.json();
      });
    }
    return fetches[src].then(function (data) {
      node.replaceChildren();
      DRAW[node.dataset.chart](node, data);
      node.dataset.drawn = "1";
    }).catch(function (error) {
      node.replaceChildren(el("p", { class: "error-message" }, "Could not draw this chart: " + error.message));
    });
  }

  function drawAll(root) {
    fetches = {};
    return Promise.all(Array.from(root.querySelectorAll("[data-chart]")).map(load));
  }

  let timer = null, last = 0;
  function refresh(root) {
    const wait = Math.max(0, REDRAW_MS - (Date.now() - last));
    if (timer) return;
    timer = setTimeout(function () { timer = null; last = Date.now(); drawAll(root); }, wait);
  }

  window.ScaletuneCharts = {
    start: function (root) {
      last = Date.now();
      drawAll(root);
      document.body.addEventListener("st-refresh", () => refresh(root));
    },
  };
})();
