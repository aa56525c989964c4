// "What changed": the ranking of the scoped API for a window and its baseline, as text nodes only
// (organisation names, metric names and log templates come from other organisations: never HTML).
// Each entry links to the war room with the lanes the page came with plus that entry's lane.

const API = "/api/v1/analysis/changes";
const ONSETS = "/api/v1/analysis/onsets";
const WARROOM = "/timeline/";
const FIELDS = ["from", "to", "baseline_from", "baseline_to"];
const $ = (id) => document.getElementById(id);

function pageParams() {
  return new URLSearchParams(window.location.search);
}

// The war-room URL of this window with the lanes the page came with, and `lane` added (once).
export function warroomUrl(params, lane) {
  const out = new URLSearchParams();
  for (const key of ["from", "to", "align"]) if (params.get(key)) out.set(key, params.get(key));
  const lanes = params.getAll("lane");
  for (const spec of lanes) out.append("lane", spec);
  if (lane && !lanes.includes(lane)) out.append("lane", lane);
  return `${WARROOM}?${out}`;
}

function text(tag, value, className) {
  const node = document.createElement(tag);
  node.textContent = value;
  if (className) node.className = className;
  return node;
}

function renderEntry(entry, params) {
  const item = document.createElement("li");
  item.dataset.lane = entry.lane;
  item.dataset.kind = entry.kind;
  item.appendChild(text("span", entry.score.toFixed(2), "score"));
  const what = document.createElement("span");
  what.className = "what";
  const dot = text("span", "", "org-dot");
  dot.style.background = /^#[0-9a-fA-F]{3,8}$/.test(entry.colour) ? entry.colour : "#999";
  const labels = Object.entries(entry.labels || {}).map(([k, v]) => `${k}=${v}`).join(",");
  what.append(dot, document.createTextNode(`${entry.org} · ${entry.signal} · ${entry.title}${labels ? ` {${labels}}` : ""}`));
  item.appendChild(what);
  const actions = document.createElement("span");
  actions.className = "actions";
  const add = text("a", "add lane", "add-lane");
  add.href = warroomUrl(params, entry.lane);
  add.title = entry.lane;
  actions.appendChild(add);
  item.appendChild(actions);
  item.appendChild(text("span", entry.explanation, "why"));
  for (const reason of entry.explanations || []) item.appendChild(text("span", reason.text, "why dependency"));
  return item;
}

async function load() {
  const params = pageParams();
  for (const name of FIELDS) $(name).value = params.get(name) || "";
  $("back-to-warroom").href = warroomUrl(params, null);
  const query = new URLSearchParams();
  for (const name of [...FIELDS, "align", "limit", "templates"]) if (params.get(name)) query.set(name, params.get(name));
  const status = $("changes-status");
  status.textContent = "ranking …";
  const list = $("changes");
  list.replaceChildren();
  const response = await fetch(`${API}?${query}`, { headers: { Accept: "application/json", "X-Jointline-View": "war room" } });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    status.textContent = body.error || `error ${response.status}`;
    status.classList.add("error");
    return;
  }
  const scored = body.scored || {};
  const chosen = body.baseline || {};
  const seasonal = (body.baselines || []).slice(1).map((b) => b.kind.replace("_", " "));
  const why = [chosen.kind === "nearest_with_data" ? chosen.reason : "", seasonal.length ? `and the same hours ${seasonal.join(" and ")}` : ""]
    .filter(Boolean).join("; ");
  status.textContent = `${body.from} – ${body.to} against ${body.baseline_from} – ${body.baseline_to}${why ? ` (${why})` : ""}: `
    + `${scored.series ?? 0} series, ${scored.fleet_groups ?? 0} fleet groups, ${scored.event_families ?? 0} event families scored `
    + `in ${Math.round(body.server_ms)} ms`;
  if (!body.entries.length && body.data_extent) {
    // the window holds none of the viewer's data: say so, and where the data is
    const item = text("li", `No data you may read in this window. Your data runs from ${body.data_extent.from} to ${body.data_extent.to}: `, "no-data");
    const link = document.createElement("a");
    const where = new URLSearchParams({ from: body.data_extent.from, to: body.data_extent.to });
    link.href = `?${where}`;
    link.id = "changes-data-extent";
    link.textContent = "rank that stretch";
    item.appendChild(link);
    list.appendChild(item);
  } else if (!body.entries.length) list.appendChild(text("li", "nothing you may read changed in this window"));
  for (const entry of body.entries) list.appendChild(renderEntry(entry, params));
  loadOnsets(query);
}

// The lead/lag strip: onsets of the top entries, earliest first; overlapping uncertainties are "at the
// same time" and said so.
async function loadOnsets(query) {
  const strip = $("onsets");
  strip.replaceChildren();
  const response = await fetch(`${ONSETS}?${query}`, { headers: { Accept: "application/json", "X-Jointline-View": "war room" } });
  if (!response.ok) return;
  const body = await response.json();
  for (const onset of body.onsets) {
    const item = document.createElement("li");
    item.dataset.rank = String(onset.rank);
    const when = onset.onset ? `${onset.onset.replace(/\.\d+Z$/, "Z")} ± ${Math.round(onset.uncertainty_ms / 1000)} s` : "no onset found";
    const same = onset.same_time_as.length ? ` — at the same time as #${onset.same_time_as.join(", #")}` : "";
    item.textContent = `#${onset.rank} ${onset.org} · ${onset.title}: ${when}${same}`;
    strip.appendChild(item);
  }
}

const SELECTION = "/api/v1/analysis/selection";
const STATS = ["series", "count", "min", "max", "mean", "p50", "p95", "p99", "above_capacity_s", "above_capacity_share"];

// Statistics of one lane over a stretch and its baseline (the same length just before), as the API
// gives them; "use as analysis window" reopens the ranking on the stretch.
async function loadSelection() {
  const params = new URLSearchParams({ lane: $("sel_lane").value.trim(), from: $("sel_from").value.trim(), to: $("sel_to").value.trim() });
  const status = $("selection-status");
  const rows = $("selection").tBodies[0];
  rows.replaceChildren();
  const response = await fetch(`${SELECTION}?${params}`, { headers: { Accept: "application/json", "X-Jointline-View": "war room" } });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    status.textContent = body.error || `error ${response.status}`;
    return;
  }
  status.textContent = `${body.lane}: percentiles of ${body.step_ms / 1000} s buckets`;
  for (const name of STATS) {
    const row = document.createElement("tr");
    row.dataset.stat = name;
    row.append(text("th", name), text("td", String(body.selection[name] ?? "–")), text("td", String(body.baseline[name] ?? "–")));
    rows.appendChild(row);
  }
}

$("selection-form").addEventListener("submit", (event) => {
  event.preventDefault();
  loadSelection();
});

$("use-as-window").addEventListener("click", (event) => {
  event.preventDefault();
  const params = pageParams();
  params.set("from", $("sel_from").value.trim());
  params.set("to", $("sel_to").value.trim());
  for (const name of ["baseline_from", "baseline_to"]) params.delete(name);
  window.history.replaceState(null, "", `${window.location.pathname}?${params}`);
  load();
});

// Lagged cross-correlation of two lanes over the analysis window.
$("lag-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const params = pageParams();
  const query = new URLSearchParams({ a: $("lag_a").value.trim(), b: $("lag_b").value.trim() });
  for (const key of ["from", "to", "align"]) if (params.get(key)) query.set(key, params.get(key));
  const response = await fetch(`/api/v1/analysis/lag?${query}`, { headers: { Accept: "application/json", "X-Jointline-View": "war room" } });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) $("lag-result").textContent = body.error || `error ${response.status}`;
  else if (body.lag_ms === null) $("lag-result").textContent = "too little data in the window";
  else $("lag-result").textContent = `b ${body.lag_ms >= 0 ? "follows" : "leads"} a by ${Math.abs(body.lag_ms / 1000)} s (r = ${body.correlation.toFixed(2)})`;
});

$("changes-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const params = pageParams();
  for (const name of FIELDS) {
    const value = $(name).value.trim();
    if (value) params.set(name, value);
    else params.delete(name);
  }
  window.history.replaceState(null, "", `${window.location.pathname}?${params}`);
  load();
});

load();
