// Jointline war room: lanes of five organisations on one time axis, drawn from the scoped API.
//
// The whole view state (window, lanes in order with their kinds and flags, live mode, search, selected
// event, event-list filters) lives in the URL, so a reload or a pasted link reopens the same view.
// Data never reaches the DOM as HTML: text nodes only, and Plotly's hover text is escaped (format.js).
import { buildFigure, MARGIN, readout } from "./figure.js";
import { formatSpan, formatTime, formatValue, labelText, laneUnit } from "./format.js";
import { formatSpec, hasFlag, orderPinned, parseSpec, withFlag, withKind } from "./spec.js";

const LIVE_REFRESH_MS = 15000;
const ZOOM_DEBOUNCE_MS = 200;
const API = "/timeline/api";
const ORGS = JSON.parse(document.getElementById("organizations").textContent);

const state = {
  from: "now-3h",
  to: "now",
  lanes: [],
  live: false,
  q: "",
  sel: null,
  ev: { org: "", signal: "", kind: "", severity: "", text: "" },
};
const view = { lanes: [], marks: [], hits: [], events: [], highlight: null, window: null, geometry: null };
let catalogue = null;
let plotReady = false;
let inflight = null;
let zoomTimer = null;
let liveTimer = null;
let ignoreRelayout = false;
const colours = Object.fromEntries(ORGS.map((o) => [o.slug, o.colour]));

const $ = (id) => document.getElementById(id);

// ------------------------------------------------------------------ URL state

function readUrl() {
  const p = new URLSearchParams(window.location.search);
  state.from = p.get("from") || state.from;
  state.to = p.get("to") || state.to;
  state.lanes = p.getAll("lane").filter((l) => parseSpec(l));
  // Links made before lane specs named series by id: lanes=12,13 (resolved through the catalogue).
  // A permalink's or an incident's page sends its lane specs as one comma-joined `lanes` parameter.
  const joined = p.get("lanes") || "";
  const specs = /^[\d,\s]*$/.test(joined) ? [] : splitSpecs(joined);
  if (!state.lanes.length && specs.length) state.lanes = specs;
  state.legacySeries = specs.length ? [] : joined.split(",").map(Number).filter((n) => Number.isInteger(n) && n > 0);
  state.incident = Number(p.get("incident")) || null;
  // Lanes of a permalink this viewer may not read arrive as placeholders (owner/signal, nothing more).
  state.unsharedLanes = (p.get("unshared_lanes") || "").split(",").map((item) => item.split("/"))
    .filter((parts) => parts.length === 2 && parts[0] && parts[1]).map(([org, signal]) => ({ org, signal }));
  state.live = p.get("live") === "1";
  state.q = p.get("q") || "";
  state.sel = p.get("sel") ? Number(p.get("sel")) : null;
  for (const key of Object.keys(state.ev)) state.ev[key] = p.get(`ev_${key}`) || "";
}

// "kind:org/signal/what{a=1,b=2}!pin,log,kind:org/…" → its specs: a comma outside braces starts a new
// spec only where a spec can start (flags and labels never hold "kind:org/").
function splitSpecs(text) {
  const specs = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "{") depth++;
    else if (c === "}") depth = Math.max(0, depth - 1);
    else if (c === "," && depth === 0 && /^[a-z]+:[a-z][a-z0-9-]*\//.test(text.slice(i + 1))) {
      specs.push(text.slice(start, i));
      start = i + 1;
    }
  }
  specs.push(text.slice(start));
  return specs.map((t) => t.trim()).filter((t) => parseSpec(t));
}

// Parameters this page owns; any other (incident, permalink, …) is kept as it came.
const OWN_PARAMS = ["from", "to", "lane", "lanes", "live", "q", "sel", ...Object.keys(state.ev).map((k) => `ev_${k}`)];

function writeUrl() {
  const p = new URLSearchParams(window.location.search);
  for (const key of OWN_PARAMS) p.delete(key);
  p.set("from", state.from);
  p.set("to", state.to);
  for (const lane of state.lanes) p.append("lane", lane);
  if (state.live) p.set("live", "1");
  if (state.q) p.set("q", state.q);
  if (state.sel) p.set("sel", String(state.sel));
  for (const [key, value] of Object.entries(state.ev)) if (value) p.set(`ev_${key}`, value);
  const url = `${window.location.pathname}?${p}`;
  if (url !== `${window.location.pathname}${window.location.search}`) window.history.replaceState(null, "", url);
}

function windowParams() {
  return `from=${encodeURIComponent(state.from)}&to=${encodeURIComponent(state.to)}`;
}

// ------------------------------------------------------------------ fetching

async function getJson(url, signal) {
  const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" }, signal });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error || body.detail || `HTTP ${response.status}`);
  return body;
}

// Writes go through Django's session auth, so they carry the CSRF token (cookie, or the form's field).
function csrfToken() {
  const cookie = document.cookie.split(";").map((c) => c.trim()).find((c) => c.startsWith("csrftoken="));
  if (cookie) return decodeURIComponent(cookie.slice("csrftoken=".length));
  const field = document.querySelector("input[name=csrfmiddlewaretoken]");
  return field ? field.value : "";
}

async function postJson(url, payload) {
  const response = await fetch(url, {
    method: "POST", credentials: "same-origin",
    headers: { Accept: "application/json", "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
    body: JSON.stringify(payload),
  });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const detail = body.error || body.detail || Object.entries(body).map(([k, v]) => `${k}: ${[].concat(v).join(" ")}`).join("; ");
    throw new Error(detail || `HTTP ${response.status}`);
  }
  return body;
}

function setStatus(text, isError = false) {
  const status = $("status");
  status.textContent = text;
  status.classList.toggle("error", isError);
}

function plotWidth() {
  const width = $("figure").clientWidth || 1200;
  return Math.max(200, Math.min(4000, Math.round(width - MARGIN.l - MARGIN.r)));
}

function eventFilterParams() {
  const p = new URLSearchParams();
  for (const key of ["org", "signal", "kind", "severity"]) if (state.ev[key]) p.set(key, state.ev[key]);
  if (state.ev.text) p.set("q", state.ev.text);
  return p.toString();
}

async function refresh({ reason = "" } = {}) {
  writeUrl();
  if (inflight) inflight.abort();
  const controller = new AbortController();
  inflight = controller;
  const started = performance.now();
  setStatus(reason ? `${reason}…` : "loading…");
  const lanesUrl = `${API}/lanes?${windowParams()}&width=${plotWidth()}&${state.lanes.map((l) => `lane=${encodeURIComponent(l)}`).join("&")}`;
  try {
    const [lanes, events, hits, selected, annotated] = await Promise.all([
      getJson(lanesUrl, controller.signal),
      getJson(`${API}/events?${windowParams()}&limit=500&${eventFilterParams()}`, controller.signal),
      state.q ? getJson(`${API}/events?${windowParams()}&limit=200&q=${encodeURIComponent(state.q)}`, controller.signal) : null,
      state.sel && !findEvent(state.sel) ? getJson(`${API}/events?id=${state.sel}`, controller.signal).catch(() => null) : null,
      state.incident ? getJson(`/api/v1/incidents/${state.incident}/annotations`, controller.signal).catch(() => null) : null,
    ]);
    if (controller.signal.aborted) return;
    view.lanes = lanes.lanes;
    view.marks = [...lanes.marks, ...annotationMarks(annotated)].sort((a, b) => a.t - b.t);
    view.window = { from_ms: lanes.from_ms, to_ms: lanes.to_ms };
    view.events = events.events;
    view.eventsMore = events.more;
    view.hits = hits ? hits.events : [];
    view.hitsMore = hits ? hits.more : false;
    if (selected && selected.events.length) view.selectedEvent = selected.events[0];
    view.highlight = state.sel ? findEvent(state.sel) : null;
    await render();
    const points = Math.max(0, ...view.lanes.map((l) => l.points || 0));
    setStatus(`${formatSpan(view.window.to_ms - view.window.from_ms)} · ${view.lanes.length} lanes · ` +
      `≤ ${points} points per lane · server ${lanes.server_ms} ms · ${Math.round(performance.now() - started)} ms`);
  } catch (error) {
    if (error.name !== "AbortError") {
      setStatus(`error: ${error.message}`, true);
      console.error(error.stack);
    }
  } finally {
    if (inflight === controller) inflight = null;
  }
}

// Annotations of the incident this view belongs to, drawn like notable events across every lane.
function annotationMarks(body) {
  if (!body || !body.annotations) return [];
  return body.annotations.map((a) => ({
    id: `annotation-${a.id}`, org: a.org, colour: a.colour, signal: "annotation", kind: "annotation",
    severity: "notice", name: a.text, message: `${a.text}${a.author ? ` (${a.author})` : ""}`,
    t: Date.parse(a.ts), end_t: a.end_ts ? Date.parse(a.end_ts) : null, resource: {}, annotation: true,
  }));
}

function unsharedItem(colour, text) {
  const span = document.createElement("span");
  const dot = document.createElement("span");
  dot.className = "org-dot";
  dot.style.background = colour || "#98a2b3";
  span.append(dot, document.createTextNode(text));
  return span;
}

function renderUnshared() {
  const box = $("unshared");
  const unshared = (catalogue && catalogue.unshared) || [];
  const linked = new Map();
  for (const { org, signal } of state.unsharedLanes) {
    const key = `${org} · ${signal}`;
    linked.set(key, { org, count: (linked.has(key) ? linked.get(key).count : 0) + 1 });
  }
  box.hidden = !unshared.length && !linked.size;
  box.replaceChildren();
  if (box.hidden) return;
  if (linked.size) {
    const placeholders = document.createElement("div");
    placeholders.id = "unshared-lanes";
    placeholders.appendChild(document.createTextNode("Lanes of this link not shared with you: "));
    for (const [key, { org, count }] of linked) {
      placeholders.appendChild(unsharedItem(colours[org], `${key}: ${count} lane${count > 1 ? "s" : ""}`));
    }
    box.appendChild(placeholders);
  }
  if (unshared.length) box.appendChild(document.createTextNode("Not shared with you: "));
  for (const item of unshared) {
    box.appendChild(unsharedItem(item.colour, `${item.org} · ${item.signal}: ${item.count} series`));
  }
  const link = document.createElement("a");
  link.href = "/sharing/";
  link.textContent = "request access";
  box.appendChild(link);
}

function findEvent(id) {
  if (!id) return null;
  const pools = [view.events, view.hits, view.marks, ...view.lanes.map((l) => l.events || []),
    ...view.lanes.map((l) => (l.segments || []).map((s) => s.event).filter(Boolean)),
    ...view.lanes.map((l) => (l.marks || []).map((m) => m.event))];
  for (const pool of pools) {
    const found = pool.find((e) => e.id === id);
    if (found) return found;
  }
  return view.selectedEvent && view.selectedEvent.id === id ? view.selectedEvent : null;
}

// ------------------------------------------------------------------ rendering

async function render() {
  const figure = buildFigure({ lanes: view.lanes, marks: view.marks, hits: view.hits, highlight: view.highlight,
    window: view.window, colours, width: plotWidth() });
  view.geometry = figure.geometry;
  const plot = $("plot");
  ignoreRelayout = true;
  await Plotly.react(plot, figure.traces, figure.layout, {
    responsive: true, displaylogo: false, doubleClick: false, scrollZoom: true,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "resetScale2d", "toImage"],
  });
  ignoreRelayout = false;
  if (!plotReady) {
    plotReady = true;
    plot.on("plotly_relayout", onRelayout);
    plot.on("plotly_click", onPlotClick);
  }
  renderTitles();
  renderEvents();
  renderHits();
  renderMarks();
  renderSelected();
  renderInView();
  document.body.dataset.ready = "1";
  document.body.dataset.renders = String(Number(document.body.dataset.renders || 0) + 1);
  document.body.dataset.window = `${view.window.from_ms},${view.window.to_ms}`;
}

function renderTitles() {
  const box = $("titles");
  box.replaceChildren();
  for (const row of view.geometry.rows) {
    if (row.strip) {
      const label = document.createElement("div");
      label.className = "wr-strip-label";
      label.style.top = `${MARGIN.t + row.top + 3}px`;
      label.textContent = row.strip === "marks" ? (view.marks.some((m) => m.annotation) ? "notes\n\nevents" : "events") : "hits";
      box.appendChild(label);
      continue;
    }
    const lane = row.lane;
    const title = document.createElement("div");
    title.className = "wr-title";
    title.style.top = `${MARGIN.t + row.titleTop}px`;
    title.style.left = `${MARGIN.l}px`;
    title.dataset.spec = lane.spec;
    title.dataset.index = String(row.index);
    title.style.setProperty("--org", lane.title.colour);
    const dot = document.createElement("span");
    dot.className = "org-dot";
    dot.style.background = lane.title.colour;
    const name = document.createElement("span");
    name.className = "wr-title-text";
    const org = document.createElement("b");
    org.textContent = lane.title.org;
    org.style.color = lane.title.colour;
    name.append(org, document.createTextNode(` · ${lane.title.signal} · ${lane.title.what}`));
    const unit = ["spans", "logs"].includes(lane.kind) ? "" : laneUnit(lane.title.unit, lane.fn);
    if (unit) {
      const unitSpan = document.createElement("span");
      unitSpan.className = "wr-unit";
      unitSpan.textContent = unit;
      name.appendChild(unitSpan);
    }
    title.append(dot, name);
    const notes = [lane.note, lane.capacity && lane.capacity.note].filter(Boolean);
    const levels = (lane.group && lane.group.levels) || [];
    if (levels.includes("aggregate")) notes.push("shared as a fleet aggregate");
    else if (levels.includes("redacted")) notes.push(["logs", "spans"].includes(lane.kind) ? "shared without message bodies" : "redacted");
    if (lane.kind === "heatmap" && lane._zmax) notes.push(`colour 0 – ${formatValue(lane._zmax, laneUnit(lane.title.unit, lane.fn))}`);
    if (lane.kind === "logs" && lane.mode === "list") notes.push(`${lane.events.length} lines, hover for the message`);
    const note = notes.join(" · ");
    if (note) {
      const span = document.createElement("span");
      span.className = "wr-note";
      span.textContent = note;
      title.appendChild(span);
    }
    if (hasFlag(lane.spec, "pin")) title.classList.add("pinned");
    const value = document.createElement("span");
    value.className = "wr-readout";
    title.appendChild(value);
    title.appendChild(laneControls(lane.spec, row.index));
    box.appendChild(title);
    row.readout = value;
  }
}

function laneControls(spec, index) {
  const controls = document.createElement("span");
  controls.className = "wr-lane-controls";
  const button = (text, label, action) => {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = text;
    b.title = label;
    b.setAttribute("aria-label", label);
    b.addEventListener("click", (event) => {
      event.stopPropagation();
      action();
    });
    controls.appendChild(b);
  };
  const parsed = parseSpec(spec);
  if (parsed.kind === "band") {
    button(hasFlag(spec, "nodes") ? "−nodes" : "+nodes", "per-node lines", () => replaceLane(index, withFlag(spec, "nodes", !hasFlag(spec, "nodes"))));
  }
  button("↑", "move up", () => moveLane(index, -1));
  button("↓", "move down", () => moveLane(index, 1));
  button(hasFlag(spec, "pin") ? "unpin" : "pin", "pin on top", () => replaceLane(index, withFlag(spec, "pin", !hasFlag(spec, "pin"))));
  button("✕", "remove lane", () => removeLane(index));
  return controls;
}

function setLanes(lanes) {
  state.lanes = orderPinned(lanes);
  refresh({ reason: "lanes changed" });
}

function moveLane(index, delta) {
  const lanes = [...state.lanes];
  const target = index + delta;
  if (target < 0 || target >= lanes.length) return;
  [lanes[index], lanes[target]] = [lanes[target], lanes[index]];
  setLanes(lanes);
}

function replaceLane(index, spec) {
  const lanes = [...state.lanes];
  lanes[index] = spec;
  setLanes(lanes);
}

function removeLane(index) {
  setLanes(state.lanes.filter((_, i) => i !== index));
}

function addLane(spec) {
  if (!state.lanes.includes(spec)) setLanes([...state.lanes, spec]);
}

// ------------------------------------------------------------------ zoom, pan, crosshair

function toMs(value) {
  if (typeof value === "number") return value;
  return Date.parse(`${String(value).replace(" ", "T")}${/Z|[+-]\d\d:?\d\d$/.test(value) ? "" : "Z"}`);
}

function onRelayout(update) {
  if (ignoreRelayout) return;
  const start = update["xaxis.range[0]"] ?? (update["xaxis.range"] || [])[0];
  const end = update["xaxis.range[1]"] ?? (update["xaxis.range"] || [])[1];
  if (start === undefined || end === undefined) return;
  const fromMs = toMs(start);
  const toMsValue = toMs(end);
  if (!(toMsValue > fromMs)) return;
  setWindow(fromMs, toMsValue, "zoom");
}

function setWindow(fromMs, toMsValue, reason) {
  const span = toMsValue - fromMs;
  if (state.live) {
    if (Date.now() - toMsValue > span * 0.05) {
      state.live = false;
      $("live").checked = false;
    } else {
      state.from = `now-${Math.max(1, Math.round(span / 1000))}s`;
      state.to = "now";
    }
  }
  if (!state.live) {
    state.from = new Date(Math.round(fromMs)).toISOString();
    state.to = new Date(Math.round(toMsValue)).toISOString();
  }
  syncTimeInputs();
  clearTimeout(zoomTimer);
  zoomTimer = setTimeout(() => refresh({ reason }), ZOOM_DEBOUNCE_MS);
}

function zoomOut(factor = 2) {
  if (!view.window) return;
  const { from_ms: a, to_ms: b } = view.window;
  const centre = (a + b) / 2;
  const half = ((b - a) * factor) / 2;
  setWindow(centre - half, Math.min(centre + half, state.live ? Date.now() : Infinity), "zoom out");
}

function centreOn(t) {
  const { from_ms: a, to_ms: b } = view.window;
  const half = (b - a) / 2;
  if (state.live) {
    state.live = false;
    $("live").checked = false;
  }
  setWindow(t - half, t + half, "centring");
}

function plotArea() {
  const layout = $("plot")._fullLayout;
  if (!layout || !layout.xaxis) return null;
  return { left: layout.margin.l, width: layout.xaxis._length, range: layout.xaxis.range.map(toMs) };
}

function onMouseMove(event) {
  const area = plotArea();
  const cross = $("crosshair");
  if (!area || !view.geometry) return;
  const rect = $("figure").getBoundingClientRect();
  const x = event.clientX - rect.left - area.left;
  if (x < 0 || x > area.width) {
    cross.hidden = true;
    return;
  }
  const t = area.range[0] + (x / area.width) * (area.range[1] - area.range[0]);
  view.crosshairMs = t;
  cross.hidden = false;
  cross.style.left = `${area.left + x}px`;
  cross.style.top = `${MARGIN.t}px`;
  cross.style.height = `${view.geometry.plotHeight}px`;
  $("crosshair-time").textContent = formatTime(t);
  for (const row of view.geometry.rows) {
    if (row.readout) row.readout.textContent = readout(row.lane, t);
  }
}

// The time under the mouse, from the figure's x axis (null outside the plot area).
function timeAt(clientX) {
  const area = plotArea();
  if (!area) return null;
  const x = clientX - $("figure").getBoundingClientRect().left - area.left;
  if (x < 0 || x > area.width) return null;
  return area.range[0] + (x / area.width) * (area.range[1] - area.range[0]);
}

function onPlotClick(data) {
  const point = data.points && data.points[0];
  if (!point) return;
  const id = point.customdata;
  if (typeof id === "number" || typeof id === "string") {
    const event = findEvent(id);
    if (event) selectEvent(event, { centre: false });
  }
}

// ------------------------------------------------------------------ events, search, selection

function selectEvent(event, { centre }) {
  state.sel = event.id;
  view.selectedEvent = event;
  view.highlight = event;
  if (centre) {
    centreOn(event.t);
  } else {
    writeUrl();
    render();
  }
}

function eventRow(e) {
  const row = document.createElement("tr");
  row.className = `sev-${e.severity}`;
  row.dataset.id = String(e.id);
  if (e.id === state.sel) row.classList.add("selected");
  const cells = [formatTime(e.t), e.org, e.signal, e.severity, e.name, labelText(e.resource), e.message ?? ""];
  cells.forEach((value, i) => {
    const cell = document.createElement("td");
    if (i === 1) {
      const dot = document.createElement("span");
      dot.className = "org-dot";
      dot.style.background = e.colour;
      cell.appendChild(dot);
    }
    cell.appendChild(document.createTextNode(value)); // never parsed as HTML
    row.appendChild(cell);
  });
  row.addEventListener("click", () => selectEvent(e, { centre: true }));
  return row;
}

function renderEvents() {
  const body = $("event-rows");
  body.replaceChildren(...view.events.map(eventRow));
  $("event-count").textContent = `(${view.events.length}${view.eventsMore ? "+, first shown" : ""})`;
}

function hitItem(e) {
  const item = document.createElement("li");
  item.dataset.id = String(e.id);
  if (e.id === state.sel) item.classList.add("selected");
  const head = document.createElement("div");
  head.className = "wr-hit-head";
  const dot = document.createElement("span");
  dot.className = "org-dot";
  dot.style.background = e.colour;
  head.append(dot, document.createTextNode(`${formatTime(e.t, false)} ${e.org} · ${e.name}`));
  const message = document.createElement("div");
  message.className = "wr-hit-message";
  message.textContent = e.message || "";
  item.append(head, message);
  item.addEventListener("click", () => selectEvent(e, { centre: true }));
  return item;
}

function renderHits() {
  $("hits-panel").hidden = !state.q;
  $("hits").replaceChildren(...view.hits.map(hitItem));
  $("hit-count").textContent = state.q ? `(${view.hits.length}${view.hitsMore ? "+" : ""})` : "";
}

function renderMarks() {
  $("mark-list").replaceChildren(...view.marks.map(hitItem));
  const legend = $("legend");
  legend.replaceChildren();
  for (const org of ORGS) {
    const chip = document.createElement("span");
    chip.className = "wr-chip";
    const dot = document.createElement("span");
    dot.className = "org-dot";
    dot.style.background = org.colour;
    chip.append(dot, document.createTextNode(org.name));
    legend.appendChild(chip);
  }
}

function renderSelected() {
  const box = $("selected");
  const e = view.highlight;
  box.hidden = !e;
  box.replaceChildren();
  if (!e) return;
  const head = document.createElement("h2");
  head.textContent = "Selected";
  const close = document.createElement("button");
  close.type = "button";
  close.className = "link";
  close.textContent = "clear";
  close.addEventListener("click", () => {
    state.sel = null;
    view.highlight = null;
    writeUrl();
    render();
  });
  head.appendChild(close);
  const meta = document.createElement("div");
  meta.className = "wr-hit-head";
  const dot = document.createElement("span");
  dot.className = "org-dot";
  dot.style.background = e.colour;
  meta.append(dot, document.createTextNode(`${e.org} · ${e.signal} · ${e.name} (${e.severity})`));
  const when = document.createElement("div");
  when.textContent = `${formatTime(e.t)}${e.end_t ? ` – ${formatTime(e.end_t)}` : ""}`;
  const where = document.createElement("div");
  where.textContent = labelText(e.resource);
  const message = document.createElement("pre");
  message.className = "wr-message";
  message.textContent = e.message || "";
  box.append(head, meta, when, where, message);
}

// ------------------------------------------------------------------ lane picker

function renderInView() {
  const list = $("lanes-in-view");
  list.replaceChildren();
  state.lanes.forEach((spec, index) => {
    const lane = view.lanes[index];
    const item = document.createElement("li");
    const label = document.createElement("span");
    label.className = "wr-in-view-label";
    label.textContent = lane ? `${lane.title.org} · ${lane.title.signal} · ${lane.title.what}` : spec;
    label.title = spec;
    const kinds = document.createElement("select");
    kinds.setAttribute("aria-label", "lane kind");
    const parsed = parseSpec(spec);
    const allowed = allowedKinds(parsed);
    for (const kind of allowed) {
      const option = document.createElement("option");
      option.value = kind;
      option.textContent = kind;
      option.selected = kind === parsed.kind;
      kinds.appendChild(option);
    }
    kinds.addEventListener("change", () => replaceLane(index, withKind(spec, kinds.value)));
    item.append(label, kinds, laneControls(spec, index));
    list.appendChild(item);
  });
}

function allowedKinds(parsed) {
  if (["spans", "logs"].includes(parsed.kind)) return ["spans", "logs"];
  const group = catalogue && catalogue.series.find((g) => g.org === parsed.org && g.metric === parsed.what);
  return group ? group.kinds : [parsed.kind];
}

function renderCatalogue() {
  if (!catalogue) return;
  const org = $("pick-org").value;
  const signal = $("pick-signal").value;
  const text = $("pick-text").value.trim();
  const labelFilter = text.includes("=") ? text.split(",").map((s) => s.trim().split("=", 2)).filter(([k, v]) => k && v !== undefined) : [];
  const needle = labelFilter.length ? "" : text.toLowerCase();
  const box = $("catalogue");
  box.replaceChildren();
  const entries = [];
  for (const family of catalogue.events) {
    entries.push({ org: family.org, signal: family.signal, text: `${family.kind} events (${family.count} in window)`,
      kinds: family.with_duration ? ["spans", "logs"] : ["logs"], make: (kind) => formatSpec({ kind, org: family.org, signal: family.signal, what: "", labels: [], capacity: "", flags: [] }) });
  }
  for (const group of catalogue.series) {
    const haystack = `${group.org} ${group.signal} ${group.metric} ${Object.entries(group.labels).map(([k, vs]) => vs.map((v) => `${k}=${v}`).join(" ")).join(" ")}`.toLowerCase();
    if (needle && !haystack.includes(needle)) continue;
    if (labelFilter.length && !labelFilter.every(([k, v]) => (group.labels[k] || []).includes(v))) continue;
    entries.push({ org: group.org, signal: group.signal, text: `${group.metric} (${group.count})`, kinds: group.kinds,
      make: (kind) => formatSpec({ kind, org: group.org, signal: group.signal, what: group.metric,
        labels: labelFilter, capacity: ["sum", "band"].includes(kind) ? group.capacity || "" : "", flags: [] }) });
  }
  let heading = "";
  for (const entry of entries) {
    if (org && entry.org !== org) continue;
    if (signal && entry.signal !== signal) continue;
    if (needle && !`${entry.org} ${entry.signal} ${entry.text}`.toLowerCase().includes(needle) && !entry.kinds.length) continue;
    const groupName = `${entry.org} · ${entry.signal}`;
    if (groupName !== heading) {
      heading = groupName;
      const h = document.createElement("h3");
      h.textContent = groupName;
      h.style.borderLeftColor = colours[entry.org] || "#888";
      box.appendChild(h);
    }
    const row = document.createElement("div");
    row.className = "wr-cat-row";
    const name = document.createElement("span");
    name.textContent = entry.text;
    row.appendChild(name);
    for (const kind of entry.kinds) {
      const add = document.createElement("button");
      add.type = "button";
      add.textContent = kind;
      add.title = `add as ${kind} lane`;
      add.addEventListener("click", () => addLane(entry.make(kind)));
      row.appendChild(add);
    }
    box.appendChild(row);
  }
}

function fillSelect(select, values) {
  for (const value of values) {
    const option = document.createElement("option");
    option.value = value;
    option.textContent = value;
    select.appendChild(option);
  }
}

// ------------------------------------------------------------------ controls

function syncTimeInputs() {
  $("from").value = state.from;
  $("to").value = state.to;
  $("live").checked = state.live;
  $("search").value = state.q;
  for (const key of Object.keys(state.ev)) $(`ev-${key}`).value = state.ev[key];
}

// Live mode refreshes once per bucket period, at the same instants in every browser. The server ends a
// live window on a bucket boundary (now rounded down to a multiple of span / width), so every viewer of
// the same view who refreshes within one bucket asks for the same answer: the server computes it once
// and serves the others from its cache. So: the first multiple of the bucket step that is at least
// LIVE_REFRESH_MS long, aligned to the epoch, and a random moment inside its first bucket (away from
// both ends, for clocks a little off; spread out, so the browsers do not all ask in the same instant).
function liveDelay(now = Date.now()) {
  const span = view.window ? view.window.to_ms - view.window.from_ms : 3 * 3600e3;
  const step = Math.ceil((span * 1000) / plotWidth()) / 1000; // ms; the server counts in µs
  const period = Math.ceil(LIVE_REFRESH_MS / step) * step;
  const next = Math.ceil((now + 1) / period) * period;
  return next - now + step * (0.1 + 0.8 * Math.random());
}

function scheduleLive() {
  clearTimeout(liveTimer);
  liveTimer = setTimeout(() => {
    if (!state.live) return; // switched off by a zoom or a pan: the next setLive(true) starts again
    if (!document.hidden) refresh({ reason: "live" });
    scheduleLive();
  }, liveDelay());
}

function setLive(on) {
  state.live = on;
  clearTimeout(liveTimer);
  if (on) {
    const span = view.window ? view.window.to_ms - view.window.from_ms : 3 * 3600e3;
    state.from = `now-${Math.round(span / 1000)}s`;
    state.to = "now";
    scheduleLive();
  }
  syncTimeInputs();
}

function bindControls() {
  $("apply").addEventListener("click", () => {
    state.from = $("from").value.trim() || "now-3h";
    state.to = $("to").value.trim() || "now";
    setLive(state.to === "now" && state.live);
    refresh();
  });
  for (const button of document.querySelectorAll("[data-preset]")) {
    button.addEventListener("click", () => {
      const preset = button.dataset.preset;
      if (state.to === "now" || state.live || !view.window) {
        state.from = `now-${preset}`;
        state.to = "now";
      } else {
        const units = { h: 3600e3, d: 86400e3 };
        const span = parseFloat(preset) * units[preset.slice(-1)];
        const centre = (view.window.from_ms + view.window.to_ms) / 2;
        state.from = new Date(centre - span / 2).toISOString();
        state.to = new Date(centre + span / 2).toISOString();
      }
      syncTimeInputs();
      refresh();
    });
  }
  $("zoom-out").addEventListener("click", () => zoomOut(2));
  $("figure").addEventListener("dblclick", () => zoomOut(2));
  $("live").addEventListener("change", () => {
    setLive($("live").checked);
    refresh({ reason: "live" });
  });
  $("search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.q = $("search").value.trim();
    refresh({ reason: "searching" });
  });
  $("search").addEventListener("search", () => {
    if (!$("search").value && state.q) {
      state.q = "";
      refresh();
    }
  });
  $("toggle-picker").addEventListener("click", () => {
    const picker = $("picker");
    picker.hidden = !picker.hidden;
    $("toggle-picker").setAttribute("aria-expanded", String(!picker.hidden));
    renderCatalogue();
    window.dispatchEvent(new Event("resize"));
  });
  $("reset-lanes").addEventListener("click", () => {
    const pinned = state.lanes.filter((l) => hasFlag(l, "pin"));
    setLanes([...pinned, ...catalogue.defaults.filter((d) => !pinned.some((p) => withFlag(p, "pin", false) === d))]);
  });
  $("copy-link").addEventListener("click", copyPermalink);
  bindIncidentControls();
  for (const id of ["pick-org", "pick-signal", "pick-text"]) $(id).addEventListener("input", renderCatalogue);
  for (const key of Object.keys(state.ev)) {
    $(`ev-${key}`).addEventListener("change", () => {
      state.ev[key] = $(`ev-${key}`).value.trim();
      refresh({ reason: "filtering" });
    });
  }
  $("figure").addEventListener("mousemove", onMouseMove);
  $("figure").addEventListener("mouseleave", () => {
    $("crosshair").hidden = true;
  });
  // A new width re-queries (the server downsamples to it); small changes only reflow.
  let resizeTimer = null;
  let queriedWidth = plotWidth();
  new ResizeObserver(() => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => {
      const width = plotWidth();
      if (plotReady && Math.abs(width - queriedWidth) > queriedWidth * 0.1) {
        queriedWidth = width;
        refresh({ reason: "resized" });
      }
    }, 400);
  }).observe($("figure"));
}

// ------------------------------------------------------------------ incidents, annotations, permalinks

const ROLE = document.querySelector(".wr-controls").dataset.role || "";
const OWN_ORG = document.querySelector(".wr-controls").dataset.org || "";
const CAN_WRITE = ["analyst", "admin"].includes(ROLE);

// The view's state as a permalink stores it: absolute window, lanes in order, search and filters.
function linkState() {
  const linked = { from: state.from, to: state.to, lanes: [...state.lanes] };
  if (view.window && (state.live || state.from.startsWith("now") || state.to.startsWith("now"))) {
    linked.from = new Date(Math.round(view.window.from_ms)).toISOString();
    linked.to = new Date(Math.round(view.window.to_ms)).toISOString();
  }
  if (state.q) linked.q = state.q;
  if (state.sel) linked.sel = state.sel;
  for (const [key, value] of Object.entries(state.ev)) if (value) linked[`ev_${key}`] = value;
  return linked;
}

async function copyPermalink() {
  writeUrl();
  const button = $("copy-link");
  button.disabled = true;
  try {
    const payload = { state: linkState() };
    if (state.incident) payload.incident = state.incident;
    const link = await postJson("/api/v1/permalinks", payload);
    const url = `${window.location.origin}${link.url}`;
    const box = $("permalink");
    box.value = url;
    box.hidden = false;
    box.dataset.id = link.id;
    box.focus();
    box.select();
    try {
      await navigator.clipboard.writeText(url);
      setStatus("permanent link copied");
    } catch {
      setStatus("permanent link made: copy it from the box");
    }
  } catch (error) {
    setStatus(`link not made: ${error.message}`, true);
  } finally {
    button.disabled = false;
  }
}

// Every organisation with a lane in view takes part (the server adds the creator's own).
function viewOrganisations() {
  const slugs = new Set(state.lanes.map((l) => parseSpec(l)).filter(Boolean).map((s) => s.org));
  slugs.delete(OWN_ORG);
  return [...slugs].filter((slug) => slug in colours).sort();
}

async function createIncident(title) {
  const linked = linkState();
  const incident = await postJson("/api/v1/incidents", {
    title, window_start: linked.from, window_end: linked.to, participants: viewOrganisations(), lanes: linked.lanes,
  });
  state.from = linked.from;
  state.to = linked.to;
  state.live = false;
  writeUrl();
  const p = new URLSearchParams(window.location.search);
  p.delete("live");
  p.delete("permalink");
  p.set("incident", String(incident.id));
  window.location.assign(`${window.location.pathname}?${p}`);
}

function toggleForm(formId, open) {
  $(formId).hidden = !open;
  if (formId === "annotate-form") document.body.classList.toggle("wr-annotating", open);
}

async function addAnnotation(text, when) {
  const ms = Date.parse(/[zZ]|[+-]\d\d:?\d\d$/.test(when) ? when : `${when.replace(" ", "T")}Z`);
  if (Number.isNaN(ms)) throw new Error("time: give an ISO time, e.g. 2026-06-15T10:00:00Z");
  await postJson(`/api/v1/incidents/${state.incident}/annotations`, { ts: new Date(ms).toISOString(), text });
}

function bindIncidentControls() {
  $("create-incident").hidden = !CAN_WRITE;
  $("annotate").hidden = !(CAN_WRITE && state.incident);
  $("create-incident").addEventListener("click", () => {
    toggleForm("incident-form", $("incident-form").hidden);
    if (!$("incident-form").hidden) $("incident-new-title").focus();
  });
  $("incident-cancel").addEventListener("click", () => toggleForm("incident-form", false));
  $("incident-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const title = $("incident-new-title").value.trim();
    if (!title) return;
    setStatus("opening the incident…");
    try {
      await createIncident(title);
    } catch (error) {
      setStatus(`incident not opened: ${error.message}`, true);
    }
  });
  $("annotate").addEventListener("click", () => {
    const open = $("annotate-form").hidden;
    toggleForm("annotate-form", open);
    if (!open) return;
    const t = view.crosshairMs ?? (view.window ? (view.window.from_ms + view.window.to_ms) / 2 : Date.now());
    $("annotate-time").value = new Date(Math.round(t)).toISOString();
    $("annotate-text").focus();
  });
  $("annotate-cancel").addEventListener("click", () => toggleForm("annotate-form", false));
  // While annotating, a click on the lanes picks the time.
  $("figure").addEventListener("click", (event) => {
    if ($("annotate-form").hidden) return;
    const t = timeAt(event.clientX);
    if (t === null) return;
    $("annotate-time").value = new Date(Math.round(t)).toISOString();
    $("annotate-text").focus();
  });
  $("annotate-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = $("annotate-text").value.trim();
    if (!text) return;
    setStatus("annotating…");
    try {
      await addAnnotation(text, $("annotate-time").value.trim());
      $("annotate-text").value = "";
      toggleForm("annotate-form", false);
      await refresh({ reason: "annotated" });
    } catch (error) {
      setStatus(`annotation not added: ${error.message}`, true);
    }
  });
}

// The incident this view belongs to (from a permalink): its title, linking back to its page.
async function showIncident(id) {
  try {
    const incident = await getJson(`/api/v1/incidents/${id}`);
    const link = $("incident-title");
    link.textContent = `Incident: ${incident.title}`;
    link.href = `/incidents/${id}/`;
    link.hidden = false;
  } catch {
    // not visible to this viewer: the view works without it
  }
}

async function main() {
  readUrl();
  syncTimeInputs();
  bindControls();
  fillSelect($("pick-org"), ORGS.map((o) => o.slug));
  fillSelect($("ev-org"), ORGS.map((o) => o.slug));
  const signals = ["application", "scheduler", "network", "storage", "gpu", "host", "other"];
  fillSelect($("pick-signal"), signals);
  fillSelect($("ev-signal"), signals);
  syncTimeInputs();
  try {
    const legacy = state.legacySeries.length ? `&series=${state.legacySeries.join(",")}` : "";
    catalogue = await getJson(`${API}/catalogue?${windowParams()}${legacy}`);
  } catch (error) {
    setStatus(`error: ${error.message}`, true);
    return;
  }
  if (!state.lanes.length && catalogue.from_series && catalogue.from_series.length) state.lanes = catalogue.from_series;
  if (!state.lanes.length) state.lanes = catalogue.defaults;
  renderUnshared();
  state.lanes = orderPinned(state.lanes);
  if (state.live) setLive(true);
  if (state.incident) showIncident(state.incident);
  await refresh();
}

// What the browser tests (and a curious engineer in the console) read: the view state and its data.
window.jointline = { state, view };
main();
