package live

import (
	"encoding/json"
	"html/template"
	"io"

	"github.com/planrun/planrun/results"
)

// BasicPage writes a plain live page for a result: the progress lines,
// each run's phases and the number of series points, updated from the
// events at liveURL. It is the page served when no richer one is given.
func BasicPage(w io.Writer, res *results.Result, liveURL string) error {
	model, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return basicTmpl.Execute(w, map[string]any{"Model": template.JS(model), "LiveURL": liveURL, "Plan": res.Plan})
}

var basicTmpl = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>planrun {{.Plan}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:right}
th:first-child,td:first-child,th:nth-child(2),td:nth-child(2){text-align:left}
#planrun-progress pre{background:#f4f4f4;padding:.5em}
</style></head><body>
<h1 id="title"></h1><p id="status"></p>
<section id="planrun-progress"><h2>Progress</h2><pre></pre></section>
<div id="runs"></div>
<script type="application/json" id="planrun-data">{{.Model}}</script>
<script>
"use strict";
const liveURL = {{.LiveURL}};
const dataEl = document.getElementById("planrun-data");
function cell(row, text, tag) {
  const c = document.createElement(tag || "td");
  c.textContent = text;
  row.appendChild(c);
  return c;
}
function fixed(v, d) { return typeof v === "number" ? v.toFixed(d) : ""; }
function render(m) {
  document.getElementById("title").textContent = "planrun: " + (m.title || m.plan || "");
  document.getElementById("status").textContent = "status: " + (m.status || "");
  const live = m.live || {progress: [], done: true};
  const prog = document.getElementById("planrun-progress");
  prog.hidden = !m.live;
  prog.querySelector("pre").textContent = (live.progress || []).join("\n");
  const runs = document.getElementById("runs");
  runs.replaceChildren();
  for (const run of m.runs || []) {
    const sec = document.createElement("section");
    sec.className = "run";
    const h = document.createElement("h2");
    h.textContent = "Run " + (run.index + 1) + (run.label ? ": " + run.label : "") + " (" + run.status + ")";
    sec.appendChild(h);
    const t = document.createElement("table");
    t.className = "phases";
    const head = document.createElement("tr");
    for (const c of ["phase", "workload", "acked", "received", "failed", "msg/s", "send p99 ms", "e2e p99 ms"]) cell(head, c, "th");
    t.appendChild(head);
    const mt = run.metrics || {};
    for (const ph of mt.phases || []) {
      for (const name of mt.order || Object.keys(ph.workloads || {})) {
        const st = (ph.workloads || {})[name];
        if (!st) continue;
        const r = document.createElement("tr");
        r.dataset.phase = ph.name;
        r.dataset.workload = name;
        cell(r, ph.name);
        cell(r, name);
        cell(r, String(st.acked)).dataset.figure = "acked";
        cell(r, String(st.received)).dataset.figure = "received";
        cell(r, String(st.failed)).dataset.figure = "failed";
        cell(r, fixed(st.rate, 1)).dataset.figure = "rate";
        cell(r, fixed((st.latency || {}).p99_ms, 2)).dataset.figure = "p99";
        cell(r, fixed((st.e2e || {}).p99_ms, 2)).dataset.figure = "e2e_p99";
        t.appendChild(r);
      }
    }
    sec.appendChild(t);
    const ul = document.createElement("ul");
    ul.className = "series";
    for (const [name, pts] of Object.entries(mt.series || {})) {
      const li = document.createElement("li");
      li.dataset.series = name;
      li.dataset.points = String(pts.length);
      li.textContent = name + ": " + pts.length + " per-second points";
      ul.appendChild(li);
    }
    sec.appendChild(ul);
    runs.appendChild(sec);
  }
}
let model = JSON.parse(dataEl.textContent);
render(model);
// The events are opened once the page has loaded: an event stream never
// ends, and a page that is still loading is not ready.
if (liveURL) window.addEventListener("load", () => setTimeout(() => {
  const es = new EventSource(liveURL);
  es.onmessage = (e) => {
    model = JSON.parse(e.data);
    dataEl.textContent = e.data;
    render(model);
    if (model.live && model.live.done) es.close();
  };
}));
</script></body></html>
`))
