// The war room's scale forecast: pick a job whose scheduler sessions you may read in the view's window
// and a target node count; for each resource with a capacity, the demand at that size with its
// interval, the multiple of the capacity, the node count at which it saturates and which saturates
// first, the one-line verdict, dependencies whose load is not shared with you (named, never estimated),
// and a small chart. Everything from the data is set as text (textContent), never as HTML.
import { panels } from "../state.js";
import { drawForecast, human } from "./forecast.js";

const JOBS = "/api/v1/analysis/forecast/jobs";
const FORECAST = "/api/v1/analysis/forecast";
const PAGE = "/analysis/forecast/";
const $ = (id) => document.getElementById(id);
const panel = $("forecast-panel");
const toggle = $("toggle-forecast");
// What the panel remembers (../state.js): the jobs listed, the latest request's number (an older answer
// arriving later is dropped), the last forecast's chart data, the start of a larger run in the window.
const forecast = panels.forecast;

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function status(text) {
  $("forecast-status").textContent = text;
}

// The view's window (timeline.js writes it on every drawing), else the page's from/to.
function viewWindow() {
  const [from, to] = (document.body.dataset.window || "").split(",").map(Number);
  const iso = (ms) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
  if (Number.isFinite(from) && Number.isFinite(to) && to > from) return { from: iso(from), to: iso(to) };
  const params = new URLSearchParams(window.location.search);
  return { from: params.get("from") || "now-3h", to: params.get("to") || "now" };
}

async function getJson(url) {
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const detail = body && typeof body === "object"
      ? Object.entries(body).map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(", ") : typeof v === "object" ? JSON.stringify(v) : v}`).join("; ")
      : "";
    throw new Error(detail || `answered ${response.status}`);
  }
  return body;
}

function windowQuery() {
  const query = new URLSearchParams();
  if ($("forecast-from").value.trim()) query.set("from", $("forecast-from").value.trim());
  if ($("forecast-to").value.trim()) query.set("to", $("forecast-to").value.trim());
  return query;
}

function chosenJob() {
  return forecast.jobs.find((j) => j.job === $("forecast-job").value) || null;
}

async function loadJobs() {
  const number = ++forecast.requested;
  clearResult();
  status("reading the jobs in this window…");
  let body;
  try {
    body = await getJson(`${JOBS}?${windowQuery()}`);
  } catch (error) {
    if (number === forecast.requested) status(`jobs could not be listed: ${error.message}`);
    return;
  }
  if (number !== forecast.requested) return;
  forecast.jobs = body.jobs;
  const select = $("forecast-job");
  const previous = select.value;
  select.replaceChildren();
  for (const job of forecast.jobs) {
    const option = el("option", `${job.job} · runs at ${job.sizes.join(", ")} nodes`);
    option.value = job.job;
    select.appendChild(option);
  }
  if (forecast.jobs.some((j) => j.job === previous)) select.value = previous;
  const phases = $("forecast-phase");
  if (!phases.options.length) {
    for (const phase of body.phases) {
      const option = el("option", phase);
      option.value = phase;
      phases.appendChild(option);
    }
    if (body.phases.includes("initialisation")) phases.value = "initialisation";
  }
  const job = chosenJob();
  if (job) $("forecast-nodes").value = String(job.largest);
  $("forecast-run").disabled = !forecast.jobs.length;
  status(forecast.jobs.length
    ? `${forecast.jobs.length} job${forecast.jobs.length === 1 ? "" : "s"} whose scheduler sessions you may read in this window`
    : "no job whose scheduler sessions you may read in this window");
}

function clearResult() {
  for (const id of ["forecast-verdict", "forecast-runs", "forecast-not-shared", "forecast-panel-chart", "forecast-chart-key", "forecast-page-link", "forecast-larger"]) {
    $(id).hidden = true;
  }
  $("forecast-resources").replaceChildren();
  $("forecast-not-shared").replaceChildren();
  const chart = $("forecast-panel-chart");
  if (window.Plotly && chart.data) window.Plotly.purge(chart);
  forecast.shownChart = null;
}

function figure(line, value, name) {
  const span = el("span", value, "wr-forecast-figure");
  span.dataset.figure = name;
  line.appendChild(span);
}

function renderResource(r, found) {
  const item = el("li");
  item.dataset.resource = r.resource;
  item.dataset.status = r.status;
  const head = el("div");
  head.appendChild(el("span", `${r.resource}${r.per_node ? " (per node)" : ""}`, "wr-forecast-name"));
  head.appendChild(el("span", r.status.replace("_", " "), `wr-forecast-status ${r.status === "saturated" ? "saturated" : ""}`));
  if (found.first === r.resource) {
    item.classList.add("first");
    head.appendChild(el("span", "saturates first", "wr-forecast-first"));
  }
  item.appendChild(head);
  if (r.demand !== null && r.demand !== undefined) {
    const [low, high] = r.interval || [null, null];
    const demand = el("div");
    demand.append(`at ${found.nodes} nodes `);
    figure(demand, human(r.demand, r.unit), "demand");
    demand.append(" (95 %: ");
    figure(demand, `${human(low, r.unit)} – ${human(high, r.unit)}`, "interval");
    demand.append(")");
    const capacity = el("div");
    figure(capacity, r.utilisation === null || r.utilisation === undefined ? "–" : `${r.utilisation.toFixed(2)}×`, "utilisation");
    capacity.append(" capacity (");
    figure(capacity, human(r.capacity, r.unit), "capacity");
    capacity.append(")");
    const saturation = el("div");
    if (r.saturates_at !== null && r.saturates_at !== undefined) {
      const between = r.saturates_between;
      saturation.append("saturates at ");
      figure(saturation, `${r.saturates_at} nodes${between ? ` (${between[0] ?? "?"} – ${between[1] ?? "∞"})` : ""}`, "saturates");
    } else {
      figure(saturation, "no scale limit", "saturates");
    }
    item.append(demand, capacity, saturation);
    const show = el("button", "chart", "link wr-forecast-show");
    show.type = "button";
    show.setAttribute("aria-pressed", "false");
    show.setAttribute("aria-label", `chart ${r.resource}`);
    show.addEventListener("click", () => drawResource(r.resource));
    head.appendChild(show);
  }
  if (r.notes && r.notes.length) item.appendChild(el("div", r.notes.join("; "), "wr-forecast-notes"));
  return item;
}

// The chart of one resource (its units are its own): demand and interval against the node count, the
// capacity, the observed runs as points and the target size.
async function drawResource(resource) {
  const chart = $("forecast-panel-chart");
  const data = forecast.shownChart;
  const trace = data && data.traces.find((t) => t.resource === resource);
  if (!trace) return;
  for (const button of document.querySelectorAll("#forecast-resources .wr-forecast-show")) {
    button.setAttribute("aria-pressed", String(button.closest("li").dataset.resource === resource));
  }
  chart.hidden = false;
  $("forecast-chart-key").hidden = false;
  $("forecast-chart-key").textContent =
    `${resource}: demand (band: 95 % interval), dashed: capacity, points: observed runs, dotted: ${data.nodes} nodes`;
  chart.dataset.resource = resource;
  chart.setAttribute("aria-label", `${resource}: demand against the node count, its capacity and the observed runs`);
  const number = forecast.requested;
  const Plotly = await plotly();
  if (Plotly && number === forecast.requested) {
    await drawForecast(chart, { nodes: data.nodes, traces: [trace] }, { compact: true });
    panel.dataset.drawn = `${number}:${resource}`;
  }
}

async function plotly() {
  for (let i = 0; i < 300 && !window.Plotly; i += 1) await new Promise((resolve) => setTimeout(resolve, 100));
  return window.Plotly;
}

async function runForecast(event) {
  if (event) event.preventDefault();
  const job = $("forecast-job").value;
  if (!job) return;
  const query = windowQuery();
  query.set("job", job);
  query.set("nodes", $("forecast-nodes").value.trim());
  query.set("phase", $("forecast-phase").value);
  const number = ++forecast.requested;
  clearResult();
  status(`forecasting ${job} at ${query.get("nodes")} nodes…`);
  let found;
  try {
    found = await getJson(`${FORECAST}?${query}`);
  } catch (error) {
    if (number === forecast.requested) status(`no forecast: ${error.message}`);
    return;
  }
  if (number !== forecast.requested) return;
  status("");
  panel.dataset.forecast = String(number);
  $("forecast-verdict").textContent = found.verdict;
  $("forecast-verdict").hidden = false;
  if (found.occurrences && found.occurrences.length) {
    const runs = found.occurrences.map((o) => o.nodes).sort((a, b) => a - b).map((n) => `${n} nodes`).join(", ");
    $("forecast-runs").textContent = `fitted on ${found.phase} of the runs at ${runs}`;
    $("forecast-runs").hidden = false;
  }
  const notShared = $("forecast-not-shared");
  for (const d of found.not_shared || []) {
    const item = el("li", `${d.entity}: ${d.note}`);
    item.dataset.entity = d.entity;
    notShared.appendChild(item);
  }
  notShared.hidden = !notShared.children.length;
  const list = $("forecast-resources");
  const ordered = [...found.resources].sort((a, b) => (b.resource === found.first) - (a.resource === found.first));
  for (const r of ordered) list.appendChild(renderResource(r, found));
  largerRun(found.nodes);
  const link = $("forecast-page-link");
  link.href = `${PAGE}?${query}`;
  link.hidden = false;
  forecast.shownChart = found.chart || null;
  const charted = forecast.shownChart && (forecast.shownChart.traces.find((t) => t.resource === found.first) || forecast.shownChart.traces[0]);
  if (charted) await drawResource(charted.resource);
}

// A run of the job at the target size or larger inside the window: if it saturated a resource, its load
// there is the capacity, not its demand, and the fit through it says less than the smaller runs alone.
const instant = (text) => Date.parse(String(text).replace(/\.\d+Z$/, "Z"));
function largerRun(nodes) {
  const job = chosenJob();
  const until = instant($("forecast-to").value.trim());
  const runs = job ? job.runs.filter((r) => !(instant(r.start) >= until)) : [];
  const run = runs.filter((r) => r.nodes >= nodes).sort((a, b) => instant(a.start) - instant(b.start))[0];
  forecast.before = null;
  if (!run || !runs.some((r) => r.nodes < nodes && instant(r.start) < instant(run.start))) return;
  forecast.before = new Date(instant(run.start) - 60_000).toISOString().replace(/\.\d{3}Z$/, "Z");
  $("forecast-larger-text").textContent =
    `This window holds a run at ${run.nodes} nodes (from ${run.start}): where it saturated a resource, its load there is the capacity, not its demand. `;
  $("forecast-larger").hidden = false;
}

$("forecast-before").addEventListener("click", () => {
  if (!forecast.before) return;
  $("forecast-to").value = forecast.before;
  runForecast(null);
});

function useViewWindow() {
  const { from, to } = viewWindow();
  $("forecast-from").value = from;
  $("forecast-to").value = to;
}

function open(show) {
  panel.hidden = !show;
  toggle.setAttribute("aria-expanded", String(show));
  if (show) {
    useViewWindow();
    loadJobs();
    $("forecast-job").focus();
  }
}

toggle.addEventListener("click", () => open(panel.hidden));
$("forecast-close").addEventListener("click", () => {
  open(false);
  toggle.focus();
});
panel.addEventListener("keydown", (event) => {
  if (event.key === "Escape") {
    event.stopPropagation();
    open(false);
    toggle.focus();
  }
});
$("forecast-view-window").addEventListener("click", () => {
  useViewWindow();
  loadJobs();
});
for (const id of ["forecast-from", "forecast-to"]) $(id).addEventListener("change", loadJobs);
$("forecast-job").addEventListener("change", () => {
  const job = chosenJob();
  if (job) $("forecast-nodes").value = String(job.largest);
});
$("forecast-form").addEventListener("submit", runForecast);
