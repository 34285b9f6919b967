#include "fedprof/monitor/dashboard.h"

namespace fedprof {

const std::string& DashboardPollScript() {
  static const std::string script = R"JS(
const token = new URLSearchParams(location.hash.slice(1)).get("token");
const headers = token ? {Authorization: "Bearer " + token} : {};
function set(id, text) { document.getElementById(id).textContent = text; }
async function poll() {
  try {
    const res = await fetch("/dashboard.json", {headers: headers, cache: "no-store"});
    if (res.ok) render(await res.json());
    else set("error", res.status === 401 ? "unauthorized: open this page as /#token=..." : "HTTP " + res.status);
  } catch (e) { set("error", "monitor unreachable"); }
  setTimeout(poll, 2000);
}
poll();
)JS";
  return script;
}

const std::string& DashboardHtml() {
  static const std::string page = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>FedProf monitor</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font-family:system-ui,sans-serif;margin:0;background:#f6f7f9;color:#222}
header{background:#1f2937;color:#fff;padding:10px 18px;display:flex;gap:28px;flex-wrap:wrap;align-items:baseline}
header h1{font-size:18px;margin:0}
.kv{font-size:14px}.kv b{font-size:18px}
main{display:grid;grid-template-columns:repeat(auto-fit,minmax(460px,1fr));gap:14px;padding:14px}
section{background:#fff;border-radius:6px;padding:10px 14px;box-shadow:0 1px 2px #0002}
section h2{font-size:14px;margin:0 0 6px}
canvas{width:100%;height:240px}
table{border-collapse:collapse;font-size:12px;width:100%}
td,th{border-bottom:1px solid #ddd;padding:3px 6px;text-align:left}
#error{color:#b91c1c}
</style></head><body>
<header><h1>FedProf monitor</h1>
<span class="kv">run <b id="run">-</b></span>
<span class="kv">state <b id="state">-</b></span>
<span class="kv">round <b id="round">-</b> / <span id="rounds">-</span></span>
<span class="kv">accuracy <b id="accuracy">-</b></span>
<span class="kv">loss <b id="loss">-</b></span>
<span class="kv">clients connected <b id="connected">-</b> / <span id="clients">-</span></span>
<span class="kv" id="error"></span></header>
<main>
<section><h2>Accuracy and loss per round</h2><canvas id="c_acc"></canvas></section>
<section><h2>Where each round's time goes (s)</h2><canvas id="c_time"></canvas></section>
<section><h2>Clients connected</h2><canvas id="c_conn"></canvas></section>
<section><h2>Times each client was selected, by data kind</h2><canvas id="c_sel"></canvas></section>
<section><h2>Selection scores per round (min, quartiles, max)</h2><canvas id="c_scores"></canvas></section>
<section><h2>Latest refusals</h2><table><thead><tr><th>time</th><th>round</th><th>who</th><th>stage</th><th>reason</th></tr></thead><tbody id="refusals"></tbody></table></section>
</main>
<script src="/chart.js"></script>
<script>
"use strict";
const palette = ["#2563eb","#dc2626","#16a34a","#d97706","#7c3aed","#0891b2","#db2777","#4b5563"];
const charts = {};
function chart(id, type, options) {
  if (typeof Chart === "undefined") return null;
  if (!charts[id]) {
    charts[id] = new Chart(document.getElementById(id), {type: type, data: {labels: [], datasets: []},
      options: Object.assign({animation: false, responsive: true, maintainAspectRatio: false}, options)});
  }
  return charts[id];
}
function fmt(v) { return v === null || v === undefined ? "-" : Number(v).toFixed(4); }
function render(d) {
  set("run", d.run_id || "-"); set("state", d.state); set("round", d.round); set("rounds", d.rounds);
  set("accuracy", fmt(d.accuracy)); set("loss", fmt(d.loss));
  set("connected", d.clients.connected); set("clients", d.clients.total);
  set("error", d.last_error ? "error: " + d.last_error : "");
  const h = d.history, rounds = h.map(r => r.round);
  let c = chart("c_acc", "line", {scales: {y: {position: "left", title: {display: true, text: "accuracy"}},
                                          y1: {position: "right", title: {display: true, text: "loss"}, grid: {drawOnChartArea: false}}}});
  if (c) {
    c.data.labels = rounds;
    c.data.datasets = [
      {label: "accuracy (central)", data: h.map(r => r.accuracy), borderColor: palette[0], yAxisID: "y", spanGaps: true},
      {label: "loss (central)", data: h.map(r => r.loss), borderColor: palette[1], yAxisID: "y1", spanGaps: true},
      {label: "train loss", data: h.map(r => r.train_loss), borderColor: palette[3], yAxisID: "y1", borderDash: [4, 3]}];
    if (h.some(r => r.fed_accuracy !== undefined)) {
      c.data.datasets.push({label: "accuracy (federated)", data: h.map(r => r.fed_accuracy ?? null),
                            borderColor: palette[2], yAxisID: "y", spanGaps: true});
    }
    c.update("none");
  }
  const phases = [...new Set(h.flatMap(r => Object.keys(r.phases)))];
  c = chart("c_time", "bar", {scales: {x: {stacked: true}, y: {stacked: true}}});
  if (c) {
    c.data.labels = rounds;
    c.data.datasets = phases.map((p, i) => ({label: p, data: h.map(r => r.phases[p] || 0), backgroundColor: palette[i % palette.length]}));
    c.update("none");
  }
  c = chart("c_conn", "line", {});
  if (c) {
    const s = d.connected_series, t0 = s.length ? s[0][0] : 0;
    c.data.labels = s.map(p => Math.round(p[0] - t0) + " s");
    c.data.datasets = [{label: "connected", data: s.map(p => p[1]), borderColor: palette[5], stepped: true, pointRadius: 0}];
    c.update("none");
  }
  c = chart("c_sel", "bar", {scales: {x: {stacked: true, ticks: {autoSkip: true}}, y: {stacked: true}}});
  if (c) {
    const kinds = Object.keys(d.selections);
    const labels = [], index = {};
    kinds.forEach(k => d.selections[k].forEach(p => { index[p[0]] = labels.length; labels.push(p[0]); }));
    c.data.labels = labels.map(id => "c" + id);
    c.data.datasets = kinds.map((k, i) => {
      const data = new Array(labels.length).fill(null);
      d.selections[k].forEach(p => { data[index[p[0]]] = p[1]; });
      return {label: k, data: data, backgroundColor: palette[i % palette.length]};
    });
    c.update("none");
  }
  c = chart("c_scores", "line", {});
  if (c) {
    const names = ["min", "lower quartile", "median", "upper quartile", "max"];
    const scored = h.filter(r => r.scores.length === 5);
    c.data.labels = scored.map(r => r.round);
    c.data.datasets = names.map((n, i) => ({label: n, data: scored.map(r => r.scores[i]),
      borderColor: palette[[4, 0, 1, 0, 4][i]], borderDash: i === 2 ? [] : [3, 3], pointRadius: 0}));
    c.update("none");
  }
  const body = document.getElementById("refusals");
  if (!d.latest_refusals.length) {
    const td = document.createElement("td"); td.colSpan = 5; td.textContent = "none so far";
    const tr = document.createElement("tr"); tr.appendChild(td); body.replaceChildren(tr);
    return;
  }
  body.replaceChildren(...d.latest_refusals.map(r => {
    const tr = document.createElement("tr");
    [new Date(r.time * 1000).toLocaleTimeString(), r.round, r.who, r.stage, r.reason].forEach(v => {
      const td = document.createElement("td"); td.textContent = v; tr.appendChild(td); });
    return tr;
  }));
}
)HTML" + DashboardPollScript() + R"HTML(</script></body></html>
)HTML";
  return page;
}

}  // namespace fedprof
