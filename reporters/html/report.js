// planrun's HTML report: draws everything from one model (see HTMLModel in
// reporters/html.go) with render(model). The model is embedded in the page
// (#planrun-data); a live page (window.planrunLiveURL) receives a new one
// with every server-sent event and renders it again, keeping the zoom.
// After each render the page writes what it shows into #planrun-check
// (charts, curves, points, tables, script errors), which tests read.
(function () {
  "use strict";

  var PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
    "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"];

  var state = {
    charts: [],   // {run, title, u, drawn, samples}
    zoom: {},     // run index -> {min, max} while zoomed, else null
    renders: 0,
    source: null,
  };

  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        if (k === "text") e.textContent = attrs[k];
        else if (k === "class") e.className = attrs[k];
        else e.setAttribute(k, attrs[k]);
      });
    }
    (children || []).forEach(function (c) {
      if (c != null) e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return e;
  }

  // cell shows a table cell's text, with the markdown's **bold** kept.
  function cell(tag, text, numeric) {
    var td = el(tag, numeric ? { class: "num" } : null);
    var m = /^\*\*(.*)\*\*$/.exec(text);
    if (m) td.appendChild(el("strong", { text: m[1] }));
    else td.textContent = text;
    return td;
  }

  function table(t, run) {
    var head = el("tr", null, t.header.map(function (h, i) { return cell("th", h, t.numeric[i]); }));
    var rows = t.rows.map(function (r) {
      return el("tr", null, r.map(function (c, i) { return cell("td", c, t.numeric[i]); }));
    });
    var tab = el("table", { class: "planrun-table", "data-title": t.title, "data-run": String(run) },
      [el("thead", null, [head]), el("tbody", null, rows)]);
    return el("div", { class: "table-wrap" }, [tab]);
  }

  function clock(s) {
    var n = Math.max(Math.floor(s), 0);
    var p = function (v) { return (v < 10 ? "0" : "") + v; };
    return p(Math.floor(n / 3600)) + ":" + p(Math.floor(n / 60) % 60) + ":" + p(n % 60);
  }

  function duration(a, b) {
    var s = Math.round((new Date(b) - new Date(a)) / 1000);
    if (!(s >= 0)) return "";
    var h = Math.floor(s / 3600), m = Math.floor(s / 60) % 60, r = s % 60;
    return (h ? h + "h" : "") + (h || m ? m + "m" : "") + r + "s";
  }

  function fmt(v) {
    if (v == null || isNaN(v)) return "-";
    var a = Math.abs(v);
    if (a >= 1000) return Math.round(v).toLocaleString("en-US");
    if (a >= 100) return v.toFixed(1);
    return v.toFixed(2);
  }

  function statusBadge(status) {
    return el("span", { class: "status status-" + status, text: status });
  }

  // header: what ran, where and how it ended.
  function header(model) {
    var r = model.result;
    var items = [];
    items.push(el("li", null, ["plan ", el("code", { text: r.plan }), " (" + r.file + ")"]));
    var st = el("li", { id: "planrun-status" }, ["status ", statusBadge(r.status)]);
    if (r.error) st.appendChild(document.createTextNode(": " + r.error));
    items.push(st);
    items.push(el("li", { text: "started " + r.started + ", took " + duration(r.started, r.finished) }));
    if (r.vars && Object.keys(r.vars).length) {
      var names = r.var_order && r.var_order.length ? r.var_order : Object.keys(r.vars).sort();
      items.push(el("li", { text: "variables: " + names.map(function (k) { return k + "=" + r.vars[k]; }).join(", ") }));
    }
    (r.targets || []).forEach(function (t) {
      items.push(el("li", { text: "target " + t.name + ": " + (t.what || t.driver) }));
    });
    items.push(el("li", { text: "units: " + r.units }));
    var nodes = [el("h1", { text: r.title || r.plan })];
    if (r.description) nodes.push(el("p", { class: "description", text: r.description }));
    nodes.push(el("ul", { class: "meta" }, items));
    return el("header", null, nodes);
  }

  function livePanel(live) {
    var lines = (live.progress || []).join("\n");
    return el("section", { class: "live" + (live.done ? " done" : ""), id: "planrun-live" }, [
      el("h2", { text: live.done ? "Run finished" : "Running" }),
      el("pre", { text: lines || "waiting for the first progress line..." }),
    ]);
  }

  function environment(r) {
    var e = r.environment || {};
    var rows = [
      ["host", e.host], ["system", e.os + "/" + e.arch], ["CPUs", String(e.cpus)],
      ["Go", e.go_version], ["planrun", r.planrun_version], ["started", r.started], ["finished", r.finished],
      ["result format", String(r.format_version || "")],
    ];
    return el("section", null, [el("h2", { text: "Environment" }),
      table({ title: "Environment", header: ["", ""], rows: rows, numeric: [false, false] }, -1)]);
  }

  // bands draws the phases (alternately shaded, named along the top) and
  // the outages (red) under the curves.
  function drawBands(run) {
    return function (u) {
      var ctx = u.ctx, b = u.bbox, pr = window.devicePixelRatio || 1;
      var m = run.metrics || {};
      ctx.save();
      ctx.beginPath();
      ctx.rect(b.left, b.top, b.width, b.height);
      ctx.clip();
      (m.phases || []).forEach(function (ph, i) {
        var a = u.valToPos(ph.start_s, "x", true), z = u.valToPos(ph.end_s, "x", true);
        if (i % 2 === 1) {
          ctx.fillStyle = "rgba(70, 100, 170, 0.08)";
          ctx.fillRect(a, b.top, z - a, b.height);
        }
        if (ph.start_s > 0) {
          ctx.strokeStyle = "rgba(80, 80, 80, 0.6)";
          ctx.lineWidth = pr;
          ctx.setLineDash([4 * pr, 3 * pr]);
          ctx.beginPath();
          ctx.moveTo(a, b.top);
          ctx.lineTo(a, b.top + b.height);
          ctx.stroke();
          ctx.setLineDash([]);
        }
      });
      (m.outages || []).forEach(function (o) {
        var a = u.valToPos(o.start_s, "x", true), z = u.valToPos(o.end_s, "x", true);
        ctx.fillStyle = "rgba(220, 40, 40, 0.16)";
        ctx.fillRect(a, b.top, Math.max(z - a, 2 * pr), b.height);
      });
      ctx.restore();
    };
  }

  // marks names the phases along the top and marks every second with
  // connection events on the time axis, over the curves.
  function drawMarks(run) {
    return function (u) {
      var ctx = u.ctx, b = u.bbox, pr = window.devicePixelRatio || 1;
      var sc = u.scales.x;
      ctx.save();
      ctx.beginPath();
      ctx.rect(b.left, b.top, b.width, b.height);
      ctx.clip();
      ctx.font = Math.round(11 * pr) + "px sans-serif";
      ctx.textBaseline = "top";
      ctx.textAlign = "left";
      ctx.fillStyle = "rgba(40, 40, 40, 0.9)";
      ((run.metrics || {}).phases || []).forEach(function (ph) {
        if (!ph.name || ph.end_s < sc.min || ph.start_s > sc.max) return;
        ctx.fillText(ph.name, Math.max(u.valToPos(ph.start_s, "x", true), b.left) + 4 * pr, b.top + 3 * pr);
      });
      ctx.fillStyle = "rgb(200, 30, 30)";
      ((run.metrics || {}).events || []).forEach(function (e) {
        if (e.t < sc.min - 1 || e.t > sc.max) return;
        var x = u.valToPos(e.t + 0.5, "x", true);
        ctx.fillRect(x - pr, b.top + b.height - 7 * pr, 2 * pr, 7 * pr);
      });
      ctx.restore();
    };
  }

  // cursorInfo says, under a chart, the phase and the events of the
  // second under the cursor.
  function cursorInfo(run, info) {
    return function (u) {
      var idx = u.cursor.idx;
      if (idx == null) { info.textContent = ""; return; }
      var t = u.data[0][idx], m = run.metrics || {};
      var parts = ["t = " + fmt(t) + " s (" + clock(t) + ")"];
      (m.phases || []).forEach(function (ph) {
        if (t >= ph.start_s && t <= ph.end_s && ph.name) parts.push("phase " + ph.name);
      });
      (m.outages || []).forEach(function (o) {
        if (t >= o.start_s && t <= o.end_s) parts.push("outage: " + o.workload + " " + o.clients + " down");
      });
      // A sample at t covers the second before it; an event's t is the
      // start of its second.
      (m.events || []).forEach(function (e) {
        if (e.t >= t - 1 && e.t < t) {
          parts.push(e.workload + " " + e.event.replace(/_/g, " ") + (e.reason ? " (" + e.reason + ")" : "") + " x" + e.count);
        }
      });
      info.textContent = parts.join(" · ");
    };
  }

  // zoomOf is the time range a chart is zoomed to, null when it shows
  // all its data.
  function zoomOf(u) {
    var xs = u.data[0], sc = u.scales.x;
    if (!xs.length || sc.min == null) return null;
    if (sc.min > xs[0] + 1e-9 || sc.max < xs[xs.length - 1] - 1e-9) return { min: sc.min, max: sc.max };
    return null;
  }

  // keepZoom writes the zoomed range into the address (#t=FROM-TO), so
  // that a link opens the page zoomed as it was.
  function keepZoom(z) {
    if (!window.history || !history.replaceState) return;
    var hash = z ? "#t=" + (+z.min.toFixed(3)) + "-" + (+z.max.toFixed(3)) : "";
    if (location.hash !== hash) history.replaceState(null, "", location.pathname + location.search + hash);
  }

  function zoomFromHash() {
    var m = /^#t=(-?[\d.]+)-(-?[\d.]+)$/.exec(location.hash);
    if (!m) return null;
    var z = { min: parseFloat(m[1]), max: parseFloat(m[2]) };
    return z.max > z.min ? z : null;
  }

  function chartBlock(run, ri, chart, order) {
    var box = el("div", { class: "chart", "data-chart": chart.title });
    var info = el("div", { class: "cursor-info" });
    var wrap = el("figure", null, [box, info]);
    if (!chart.t.length) {
      box.appendChild(el("p", { class: "empty", text: chart.title + ": no samples" }));
      return { node: wrap };
    }
    var series = [{ label: "time", value: function (u, v) { return v == null ? "-" : fmt(v) + " s"; } }];
    chart.series.forEach(function (s, i) {
      var k = s.workload ? order.indexOf(s.workload) : i;
      series.push({
        label: s.label,
        stroke: PALETTE[(k < 0 ? i : k) % PALETTE.length],
        width: 1.5,
        dash: s.dashed ? [6, 4] : undefined,
        spanGaps: false,
        points: { show: false },
        value: function (u, v) { return v == null ? "-" : fmt(v) + (chart.unit ? " " + chart.unit : ""); },
      });
    });
    var entry = { run: ri, title: chart.title, drawn: 0, samples: chart.samples };
    var opts = {
      title: chart.title + (chart.unit ? " (" + chart.unit + ")" : ""),
      width: 900,
      height: 260,
      scales: { x: { time: false } },
      axes: [{ label: "seconds since the start" }, { size: 70 }],
      series: series,
      cursor: { sync: { key: "planrun-run-" + ri }, drag: { x: true, y: false } },
      legend: { live: true },
      hooks: {
        drawClear: [drawBands(run)],
        draw: [drawMarks(run), function () { entry.drawn++; }],
        setCursor: [cursorInfo(run, info)],
        // A drag zooms every chart of the run (they share the cursor's
        // sync key, which uPlot also zooms by).
        setSelect: [function (u) {
          if (u.select.width > 0) keepZoom({ min: u.posToVal(u.select.left, "x"), max: u.posToVal(u.select.left + u.select.width, "x") });
        }],
        ready: [function (u) {
          u.over.addEventListener("dblclick", function () { keepZoom(null); });
        }],
      },
    };
    var data = [chart.t].concat(chart.series.map(function (s) { return s.values; }));
    entry.make = function () {
      opts.width = Math.max(box.clientWidth || 900, 320);
      entry.u = new uPlot(opts, data, box);
      // Set before the chart's first draw, the range replaces the data's.
      var z = state.zoom[ri];
      if (z) entry.u.setScale("x", { min: z.min, max: z.max });
    };
    return { node: wrap, entry: entry };
  }

  function runSection(model, ri) {
    var run = model.result.runs[ri], view = model.runs[ri] || {};
    var heading = run.label ? "Run " + run.label : "Phases";
    var nodes = [el("h2", { text: heading })];
    if (run.status !== "passed") {
      var p = el("p", { class: "run-status" }, ["Status: ", statusBadge(run.status)]);
      if (run.failed_step && (run.error || "").indexOf(run.failed_step) !== 0) p.appendChild(document.createTextNode(" at " + run.failed_step));
      if (run.error) p.appendChild(document.createTextNode(": " + run.error));
      nodes.push(p);
    }
    var entries = [];
    var order = (run.metrics && run.metrics.order) || [];
    (view.charts || []).forEach(function (c) {
      var b = chartBlock(run, ri, c, order);
      nodes.push(b.node);
      if (b.entry) entries.push(b.entry);
    });
    if (entries.length) {
      nodes.push(el("p", { class: "note", text: "Drag across a chart to zoom (double-click to zoom out); the charts of a run zoom together. " +
        "Shaded stripes are phases, red bands outages, red ticks on the time axis seconds with connection events. " +
        "Each curve shows at most " + model.max_points + " points: a longer run keeps each stretch's lowest and highest value." }));
    }
    (view.tables || []).forEach(function (t) {
      nodes.push(el("h3", { text: t.title }));
      nodes.push(table(t, ri));
    });
    var probes = run.probes || {};
    var pk = Object.keys(probes).sort();
    if (pk.length) {
      nodes.push(el("h3", { text: "Probes" }));
      nodes.push(el("ul", { class: "probes" }, pk.map(function (k) {
        var v = probes[k];
        return el("li", null, [el("code", { text: k }), " = " + (v == null ? "none (its step was skipped by its if:)" : JSON.stringify(v))]);
      })));
    }
    if ((run.asserts || []).length) {
      nodes.push(el("h3", { text: "Asserts" }));
      nodes.push(el("ul", { class: "asserts" }, run.asserts.map(function (a) {
        var li = el("li", { class: a.passed ? "passed" : "failed" }, [
          el("span", { class: "mark", text: a.passed ? "passed" : "FAILED" }), " ", el("code", { text: a.expr })]);
        if (a.message && !a.passed) li.appendChild(document.createTextNode(": " + a.message));
        if (a.detail) li.appendChild(document.createTextNode(" (" + a.detail + ")"));
        return li;
      })));
    }
    if ((run.warnings || []).length) {
      nodes.push(el("ul", { class: "warnings" }, run.warnings.map(function (w) { return el("li", { text: "warning: " + w }); })));
    }
    return { node: el("section", { class: "run", "data-run": String(ri) }, nodes), entries: entries };
  }

  function render(model) {
    var root = document.getElementById("planrun-report");
    // A zoomed run stays zoomed when a new model comes (a live page).
    if (state.renders === 0) {
      var z = zoomFromHash();
      (model.result.runs || []).forEach(function (r, ri) { state.zoom[ri] = z; });
    } else {
      state.zoom = {};
      state.charts.forEach(function (c) {
        if (!(c.run in state.zoom)) state.zoom[c.run] = zoomOf(c.u);
      });
    }
    state.charts.forEach(function (c) { c.u.destroy(); });
    state.charts = [];
    var page = document.createDocumentFragment();
    page.appendChild(header(model));
    if (model.live) page.appendChild(livePanel(model.live));
    var r = model.result;
    if ((model.violations || []).length) {
      page.appendChild(el("section", { class: "violations" }, [
        el("h2", { text: "Figures that do not add up" }),
        el("p", { text: "The run's figures break invariants they should hold: a defect of planrun, please report it with this result." }),
        el("ul", null, model.violations.map(function (v) { return el("li", { text: v }); })),
      ]));
    }
    (model.tables || []).forEach(function (t) {
      page.appendChild(el("h2", { text: t.title }));
      page.appendChild(table(t, -1));
    });
    var entries = [];
    (r.runs || []).forEach(function (run, ri) {
      var s = runSection(model, ri);
      page.appendChild(s.node);
      entries = entries.concat(s.entries);
    });
    page.appendChild(environment(r));
    page.appendChild(el("footer", { text: "planrun " + (r.planrun_version || "") + " · charts by uPlot" }));
    var y = window.scrollY;
    root.textContent = "";
    root.appendChild(page);
    document.title = (r.title || r.plan) + " - planrun report";
    entries.forEach(function (e) {
      e.make();
      state.charts.push(e);
    });
    window.scrollTo(0, y);
    state.renders++;
    if (model.live && model.live.done && state.source) {
      state.source.close();
      state.source = null;
    }
    writeCheck(model);
    // Drawing errors surface after the first frame: check again then.
    setTimeout(function () { writeCheck(model); }, 0);
  }

  // writeCheck records what the page shows, for tests: every chart's
  // curves with their points, the tables' cells and the script errors.
  function writeCheck(model) {
    var charts = state.charts.map(function (c) {
      var u = c.u;
      return {
        run: c.run, title: c.title, drawn: c.drawn, samples: c.samples, points: u.data[0].length,
        x: [u.scales.x.min, u.scales.x.max],
        series: u.series.slice(1).map(function (s, i) {
          var vals = u.data[i + 1], n = 0, lo = null, hi = null;
          vals.forEach(function (v) {
            if (v == null) return;
            n++;
            if (lo == null || v < lo) lo = v;
            if (hi == null || v > hi) hi = v;
          });
          return { label: s.label, length: vals.length, points: n, min: lo, max: hi };
        }),
      };
    });
    var tables = Array.prototype.map.call(document.querySelectorAll("table.planrun-table"), function (t) {
      var text = function (row) { return Array.prototype.map.call(row.cells, function (c) { return c.textContent; }); };
      return {
        title: t.getAttribute("data-title"), run: Number(t.getAttribute("data-run")),
        header: text(t.tHead.rows[0]), rows: Array.prototype.map.call(t.tBodies[0].rows, text),
      };
    });
    var status = document.querySelector("#planrun-status .status");
    var live = document.getElementById("planrun-live");
    var check = {
      renders: state.renders, charts: charts, tables: tables, errors: window.planrunErrors.slice(),
      status: status ? status.textContent : null, live: live ? live.querySelector("pre").textContent : null,
    };
    var node = document.getElementById("planrun-check");
    if (!node) {
      node = el("script", { type: "application/json", id: "planrun-check" });
      document.body.appendChild(node);
    }
    node.textContent = JSON.stringify(check).replace(/</g, "\\u003c");
  }

  window.addEventListener("error", function () {
    if (state.model) writeCheck(state.model);
  });

  window.addEventListener("resize", function () {
    state.charts.forEach(function (c) {
      var w = c.u.root.parentNode.clientWidth;
      if (w && Math.abs(w - c.u.width) > 4) c.u.setSize({ width: Math.max(w, 320), height: c.u.height });
    });
  });

  function show(model) {
    state.model = model;
    try {
      render(model);
    } catch (err) {
      window.planrunErrors.push(String(err && err.stack || err));
      try { writeCheck(model); } catch (e) { /* the check itself failed: nothing more to say */ }
    }
  }

  window.render = show;
  show(JSON.parse(document.getElementById("planrun-data").textContent));

  if (window.planrunLiveURL && window.EventSource) {
    state.source = new EventSource(window.planrunLiveURL);
    state.source.onmessage = function (ev) {
      var model;
      try {
        model = JSON.parse(ev.data);
      } catch (err) {
        window.planrunErrors.push("live update: " + err);
        return;
      }
      show(model);
    };
    // The browser reconnects by itself; meanwhile the panel says so.
    state.source.onerror = function () {
      var panel = document.getElementById("planrun-live");
      if (panel && state.source) panel.setAttribute("data-connection", "lost");
    };
    state.source.onopen = function () {
      var panel = document.getElementById("planrun-live");
      if (panel) panel.removeAttribute("data-connection");
    };
  }
})();
