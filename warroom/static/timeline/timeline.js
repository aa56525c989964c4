// Jointline war room: lanes of five organisations on one time axis, drawn from the scoped API.
//
// The whole view state (window, lanes in order with their kinds and flags, live mode, search, selected
// event, event-list filters) lives in the URL, so a reload or a pasted link reopens the same view.
// Data never reaches the DOM as HTML: text nodes only, and Plotly's hover text is escaped (format.js).
import { buildFigure, clockNote, laneEmpty, laneNotes, MARGIN, noteNumbers, readout } from "./figure.js";
import { durationText, formatSpan, formatTime, labelText, readableColour, unitLabel } from "./format.js";
import { canonicalSpec, formatSpec, hasFlag, orderPinned, parseSpec, specProblem, withFlag, withKind } from "./spec.js";
import { ANALYSIS_PARAMS, analysisPanels } from "./analysis/warroom.js";

const LIVE_REFRESH_MS = 15000;
const ZOOM_DEBOUNCE_MS = 200;
const API = "/timeline/api";
const ORGS = JSON.parse(document.getElementById("organizations").textContent);
const WARROOM = JSON.parse(document.getElementById("warroom").textContent);
const EVENT_PAGE = 500;
const PAN_FRACTION = 0.25;

const state = {
  from: "now-3h",
  to: "now",
  lanes: [],
  live: false,
  q: "",
  sel: null,
  align: true,
  ev: { org: "", signal: "", kind: "", severity: "", text: "", order: "" },
  rejected: [],
  // The rule "plus my related lanes": whoever opens the view also gets its own lanes for the view's
  // signals (ruleLanes: those it added here, kept out of the URL and of links made from the view).
  mine: false,
  ruleLanes: [],
};
const view = { lanes: [], drawn: [], marks: [], hits: [], events: [], highlight: null, window: null, geometry: null,
  clock: null, evPage: 0, evCursors: [null], dismissed: new Set() };
let catalogue = null;
let catalogueAnswer = null; // the first catalogue request, made by main()
let plotReady = false;
let inflight = null;
let zoomTimer = null;
let liveTimer = null;
let ignoreRelayout = false;
let lastDouble = 0;
const colours = Object.fromEntries(ORGS.map((o) => [o.slug, o.colour]));

const $ = (id) => document.getElementById(id);

// ------------------------------------------------------------------ URL state

function readUrl() {
  const p = new URLSearchParams(window.location.search);
  state.from = p.get("from") || state.from;
  state.to = p.get("to") || state.to;
  // A lane spec that is not understood is named, with the reason, above the lanes (never dropped unsaid).
  // Every lane read is put in its canonical text, so one lane named twice (labels in another order)
  // is drawn once.
  state.rejected = [];
  state.lanes = uniqueLanes(p.getAll("lane").filter((text) => {
    const why = specProblem(text);
    if (why) state.rejected.push({ text, why });
    return !why;
  }));
  // Links made before lane specs named series by id: lanes=12,13 (resolved through the catalogue).
  // A permalink's or an incident's page sends its lane specs as one comma-joined `lanes` parameter.
  const joined = p.get("lanes") || "";
  const specs = /^[\d,\s]*$/.test(joined) ? [] : splitSpecs(joined);
  if (!state.lanes.length && specs.length) state.lanes = uniqueLanes(specs);
  state.legacySeries = specs.length ? [] : joined.split(",").map(Number).filter((n) => Number.isInteger(n) && n > 0);
  state.incident = Number(p.get("incident")) || null;
  // Lanes of a permalink this viewer may not read arrive as placeholders: owner/signal@position.
  state.unsharedLanes = (p.get("unshared_lanes") || "").split(",").map((item) => /^([a-z][a-z0-9-]*)\/([a-z]+)(:events)?(?:@(\d+))?$/.exec(item.trim()))
    .filter(Boolean).map(([, org, signal, events, at]) => ({ org, signal, kind: events ? "logs" : "", at: at === undefined ? null : Number(at) }));
  state.permalink = /^[A-Za-z0-9]{1,32}$/.test(p.get("permalink") || "") ? p.get("permalink") : null;
  state.align = !["off", "0", "false", "no"].includes((p.get("align") || "on").toLowerCase());
  state.live = p.get("live") === "1";
  state.mine = ["1", "true", "on"].includes((p.get("mine") || "").toLowerCase());
  state.q = p.get("q") || "";
  state.sel = p.get("sel") ? Number(p.get("sel")) : null;
  for (const key of Object.keys(state.ev)) state.ev[key] = p.get(`ev_${key}`) || "";
  analysis.readParams(p);
}

// Lane specs in canonical text, each once, in their first order.
function uniqueLanes(specs) {
  const seen = new Set();
  return specs.map((text) => canonicalSpec(text) || text).filter((spec) => !seen.has(spec) && seen.add(spec));
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
const OWN_PARAMS = ["from", "to", "lane", "lanes", "live", "mine", "q", "sel", "align", "clock", ...Object.keys(state.ev).map((k) => `ev_${k}`), ...ANALYSIS_PARAMS];

function writeUrl() {
  const p = new URLSearchParams(window.location.search);
  for (const key of OWN_PARAMS) p.delete(key);
  p.set("from", state.from);
  p.set("to", state.to);
  for (const lane of chosenLanes()) p.append("lane", lane);
  for (const { text } of state.rejected) p.append("lane", text);
  if (state.mine) p.set("mine", "1");
  if (!state.align) p.set("align", "off");
  if (state.live) p.set("live", "1");
  if (state.q) p.set("q", state.q);
  if (state.sel) p.set("sel", String(state.sel));
  for (const [key, value] of Object.entries(state.ev)) if (value) p.set(`ev_${key}`, value);
  analysis.writeParams(p);
  const url = `${window.location.pathname}?${p}`;
  if (url !== `${window.location.pathname}${window.location.search}`) window.history.replaceState(null, "", url);
}

function windowParams() {
  return `from=${encodeURIComponent(state.from)}&to=${encodeURIComponent(state.to)}${state.align ? "" : "&align=off"}`;
}

// In time order the event list pages forward in time: page k starts at the time of the last event of
// page k-1 (events of that very millisecond that page k-1 showed are left out of page k). Most severe
// first, page k is the k-th slice of the ranking (offset).
function eventsUrl() {
  if (state.ev.order === "severity") {
    return `${API}/events?${windowParams()}&limit=${EVENT_PAGE}&offset=${view.evPage * EVENT_PAGE}&${eventFilterParams()}`;
  }
  const cursor = view.evCursors[view.evPage];
  const from = cursor ? `from=${encodeURIComponent(new Date(cursor.t).toISOString())}&to=${encodeURIComponent(state.to)}${state.align ? "" : "&align=off"}` : windowParams();
  return `${API}/events?${from}&limit=${EVENT_PAGE + 50}&${eventFilterParams()}`;
}

// ------------------------------------------------------------------ fetching

// What this page shows, for the owners' audit: the permalink or incident the view came through.
function viewHeader() {
  if (state.permalink) return `permalink /i/${state.permalink}${state.incident ? `, incident ${state.incident}` : ""}`;
  return state.incident ? `incident ${state.incident}` : "war room";
}

async function getJson(url, signal) {
  const headers = { Accept: "application/json", "X-Jointline-View": viewHeader() };
  const response = await fetch(url, { credentials: "same-origin", headers, signal });
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
  if (state.ev.order) p.set("order", state.ev.order);
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
  if (view.queriedWindow !== windowParams() || view.queriedFilters !== eventFilterParams()) {
    view.evPage = 0;
    view.evCursors = [null];
  }
  try {
    const [lanes, events, hits, selected, annotated, counted] = await Promise.all([
      getJson(lanesUrl, controller.signal),
      getJson(eventsUrl(), controller.signal),
      state.q ? getJson(`${API}/events?${windowParams()}&limit=200&q=${encodeURIComponent(state.q)}`, controller.signal) : null,
      state.sel && !findEvent(state.sel) ? getJson(`${API}/events?id=${state.sel}`, controller.signal).catch(() => null) : null,
      state.incident ? getJson(`/api/v1/incidents/${state.incident}/annotations`, controller.signal).catch(() => null) : null,
      view.familiesWindow !== windowParams() ? getJson(`${API}/catalogue?${windowParams()}`, controller.signal).catch(() => null) : null,
    ]);
    catalogue ??= await catalogueAnswer; // the first drawing's notices and picker read it
    if (controller.signal.aborted) return;
    if (counted) {
      // the picker's event families, with their counts in the new window
      catalogue.events = counted.events;
      view.familiesWindow = windowParams();
      if (!$("picker").hidden) renderCatalogue();
    }
    view.queriedWindow = windowParams();
    view.queriedFilters = eventFilterParams();
    view.lanes = lanes.lanes;
    view.clock = lanes.clock;
    view.marks = [...lanes.marks, ...annotationMarks(annotated)].sort((a, b) => a.t - b.t);
    view.window = { from_ms: lanes.from_ms, to_ms: lanes.to_ms };
    if (state.ev.order && events.order !== state.ev.order) {
      // a server that does not rank answers in time order, from the start of the window
      view.orderRefused = state.ev.order;
      state.ev.order = "";
      view.evPage = 0;
      view.evCursors = [null];
      view.queriedFilters = eventFilterParams();
      writeUrl();
    }
    const cursor = state.ev.order ? null : view.evCursors[view.evPage];
    const fresh = cursor ? events.events.filter((e) => !(e.t === cursor.t && cursor.ids.includes(e.id))) : events.events;
    view.events = fresh.slice(0, EVENT_PAGE);
    view.eventsMore = events.more || fresh.length > EVENT_PAGE;
    view.eventsTotal = eventTotal(events, cursor);
    view.eventsTotalExact = events.total_exact !== false;
    view.hits = hits ? hits.events : [];
    view.hitsMore = hits ? hits.more : false;
    if (selected && selected.events.length) view.selectedEvent = selected.events[0];
    view.highlight = state.sel ? findEvent(state.sel) : null;
    await render();
    const points = Math.max(0, ...view.lanes.map((l) => l.points || 0));
    document.body.dataset.clock = String((view.clock && view.clock.corrections || []).length);
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

// ------------------------------------------------------------------ placeholders: what is not shared

function ownOrg(slug) {
  return slug === OWN_ORG;
}

function unsharedOf(org, signal) {
  return (WARROOM.unshared || []).find((u) => u.org === org && u.signal === signal) || null;
}

function eventsShared(org, signal) {
  if (ownOrg(org)) return true;
  const entry = (WARROOM.event_sharing || []).find((e) => e.org === org);
  return Boolean(entry && (entry.signals.includes("*") || entry.signals.includes(signal)));
}

// The "request access" link of a placeholder: the sharing page's form, open and filled in with what
// the viewer may see (owner, signal, a published description's id), never a name the owner keeps.
function requestUrl(org, signal, family = null) {
  const p = new URLSearchParams({ owner: org, signals: signal });
  if (family) p.set("family", String(family.id));
  const window = view.window ? `${formatTime(view.window.from_ms)} – ${formatTime(view.window.to_ms)} UTC` : "";
  const what = family ? family.name : `${signal} data`;
  p.set("reason", `War room ${window}: we need ${what} of ${org} to see the incident on one timeline.`);
  return `/sharing/?${p}#request-access`;
}

// What a placeholder says, as its owner lets it: how many series (or only that data exists), then the
// descriptions the owner published.
function familyText(family) {
  return `${family.name}${family.text ? `: ${family.text}` : ""}${family.count ? ` (${family.count} series)` : ""}`;
}

// A placeholder lane: drawn where the lane is, with what exists (as the owner announces it) and a way
// to ask for it.
function placeholderLane({ org, signal, spec = "", kind = "", what = "", index = undefined }) {
  // Series placeholders describe series lanes; an event lane stands for the organisation's events.
  const events = ["logs", "spans"].includes(kind);
  const unshared = events ? null : unsharedOf(org, signal);
  const families = unshared ? unshared.families : [];
  const metric = (parseSpec(spec) || {}).what || what;
  const org_ = ORGS.find((o) => o.slug === org);
  const described = events ? `${signal} events and logs`
    : unshared ? [unshared.what, ...families.map(familyText)].join("; ") : metric || `${signal} data`;
  return {
    status: "unshared", kind: kind || "placeholder", spec, _index: index, points: 0,
    title: { org, org_name: org_ ? org_.name : org, colour: colours[org] || "#98a2b3", signal, what: described, unit: "" },
    placeholder: { org, signal, families, described, url: requestUrl(org, signal) },
  };
}

// The lanes as drawn: the server's lanes (in the order of state.lanes), a lane of another organisation
// that reads nothing because nothing of it is shared turned into a placeholder, and the permalink's
// placeholders inserted where its lanes were.
function displayLanes() {
  const drawn = view.lanes.map((lane, index) => {
    const spec = parseSpec(lane.spec) || {};
    const notShared = spec.org && !ownOrg(spec.org) && (
      (lane.status === "unavailable" && /no series you may read/.test(lane.note || "")) ||
      (["logs", "spans"].includes(lane.kind) && !eventsShared(spec.org, spec.signal)));
    if (notShared) return placeholderLane({ org: spec.org, signal: spec.signal, spec: lane.spec, kind: lane.kind, index });
    return Object.assign(lane, { _index: index });
  });
  const linked = [...state.unsharedLanes].sort((a, b) => (a.at ?? Infinity) - (b.at ?? Infinity));
  for (const item of linked) {
    const at = item.at === null ? drawn.length : Math.min(item.at, drawn.length);
    drawn.splice(at, 0, placeholderLane({ org: item.org, signal: item.signal, kind: item.kind }));
  }
  return drawn;
}

// The summary under the lanes: per owner and signal, what is not shared with the viewer as the owner
// lets it be said, each with its request link.
function renderUnshared() {
  const box = $("unshared");
  const unshared = WARROOM.unshared || [];
  box.hidden = !unshared.length;
  box.replaceChildren();
  if (box.hidden) return;
  for (const item of unshared) {
    const span = document.createElement("span");
    const dot = document.createElement("span");
    dot.className = "org-dot";
    dot.style.background = item.colour || "#98a2b3";
    const link = document.createElement("a");
    link.href = requestUrl(item.org, item.signal);
    link.textContent = "request access";
    span.append(dot, document.createTextNode(`${item.org} · ${item.signal}: ${item.text} — `), link);
    for (const family of item.families) {
      const ask = document.createElement("a");
      ask.href = requestUrl(item.org, item.signal, family);
      ask.textContent = "request access";
      span.append(document.createTextNode(`; ${familyText(family)} — `), ask);
    }
    box.appendChild(span);
  }
}

// ------------------------------------------------------------------ notices above the lanes

function notice(key, parts, { dismiss = true } = {}) {
  const box = document.createElement("div");
  box.className = "wr-notice";
  box.dataset.notice = key;
  for (const part of parts) box.append(typeof part === "string" ? document.createTextNode(part) : part);
  if (dismiss) {
    const close = document.createElement("button");
    close.type = "button";
    close.className = "link";
    close.textContent = "dismiss";
    close.setAttribute("aria-label", "dismiss this notice");
    close.addEventListener("click", () => {
      view.dismissed.add(key);
      renderNotices();
    });
    box.appendChild(close);
  }
  return box;
}

function actionButton(text, action) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = text;
  b.addEventListener("click", action);
  return b;
}

function link(text, href) {
  const a = document.createElement("a");
  a.href = href;
  a.textContent = text;
  return a;
}

// Lanes of the viewer's own data for the signals of a link it opened, that the link does not show:
// what the opener adds to a colleague's view (his per-node latency beside her lanes).
function relatedOwnLanes({ always = false } = {}) {
  if (!(always || state.permalink || state.incident) || !catalogue) return [];
  const inView = chosenLanes().map(parseSpec).filter(Boolean);
  const signals = new Set(inView.map((spec) => spec.signal));
  const shown = new Set(inView.filter((spec) => ownOrg(spec.org)).map((spec) => spec.what));
  const capacities = capacityMetrics();
  return catalogue.series
    .filter((g) => ownOrg(g.org) && signals.has(g.signal) && !shown.has(g.metric) && !capacities.has(`${g.org}/${g.metric}`))
    .map((g) => {
      const kind = g.kinds.includes("band") && g.count > 1 ? "band" : g.kinds.includes("heatmap") ? "heatmap" : g.kinds[0];
      return { group: g, spec: formatSpec({ kind, org: g.org, signal: g.signal, what: g.metric, labels: [], capacity: kind === "band" || kind === "sum" ? g.capacity || "" : "", flags: [] }) };
    })
    .filter((item) => item.spec && !state.lanes.includes(item.spec))
    .slice(0, 8);
}

// The lanes of the view chosen by someone (in the URL and in links made from it): all but those the
// rule "plus my related lanes" added for this viewer.
function chosenLanes() {
  return state.lanes.filter((lane) => !state.ruleLanes.includes(lane));
}

// Apply the rule: add this viewer's own lanes for the signals of the chosen lanes (again after a reload,
// and for whoever opens a link made from the view).
function applyMineRule() {
  state.ruleLanes = state.ruleLanes.filter((lane) => state.lanes.includes(lane));
  if (!state.mine) return;
  const added = relatedOwnLanes({ always: true }).map((r) => r.spec);
  state.ruleLanes = [...state.ruleLanes, ...added];
  state.lanes = orderPinned([...state.lanes, ...added]);
}

function setMine(on) {
  state.mine = on;
  if (on) applyMineRule();
  else {
    state.lanes = chosenLanes();
    state.ruleLanes = [];
  }
  refresh({ reason: on ? "adding your lanes" : "lanes changed" });
}

function capacityMetrics() {
  return new Set(((catalogue && catalogue.series) || []).filter((g) => g.capacity).map((g) => `${g.org}/${g.capacity}`));
}

function renderNotices() {
  const box = $("notices");
  const items = [];
  if (state.rejected.length && !view.dismissed.has("rejected")) {
    const list = document.createElement("ul");
    for (const { text, why } of state.rejected) {
      const li = document.createElement("li");
      const code = document.createElement("code");
      code.textContent = text;
      li.append(code, document.createTextNode(`: ${why}`));
      list.appendChild(li);
    }
    items.push(notice("rejected", [`${state.rejected.length === 1 ? "A lane" : `${state.rejected.length} lanes`} of the link could not be read and ${state.rejected.length === 1 ? "is" : "are"} not shown:`, list]));
  }
  const related = state.mine ? [] : relatedOwnLanes();
  if (related.length && !view.dismissed.has("related")) {
    const parts = [`Your own lanes for the signals of this ${state.permalink ? "link" : "incident"}: `];
    related.forEach((item, i) => {
      if (i) parts.push(", ");
      const b = actionButton(`${item.group.metric} (${parseSpec(item.spec).kind})`, () => addLane(item.spec));
      b.className = "link";
      b.title = `add ${item.spec}`;
      parts.push(b);
    });
    const all = actionButton(`Add ${related.length === 1 ? "it" : `all ${related.length}`}`, () => setMine(true));
    all.title = "add them, and let links you copy from this view bring each opener's own lanes too";
    parts.push(" ", all, " (links you copy then add each opener's own lanes too) ");
    items.push(notice("related", parts));
  }
  const ruled = state.ruleLanes.filter((lane) => state.lanes.includes(lane));
  if (state.mine && !view.dismissed.has("mine")) {
    const parts = [ruled.length
      ? `Plus your own lanes for the signals of this view (${ruled.length} added). `
      : "Plus your own lanes for the signals of this view (none of yours match). ",
    "Links you copy from it add each opener's own lanes too. "];
    const stop = actionButton(ruled.length ? "remove them" : "stop adding them", () => setMine(false));
    stop.className = "link";
    parts.push(stop);
    items.push(notice("mine", parts));
  }
  if (view.lanes.length && view.drawn.every((lane) => lane.placeholder || laneEmpty(lane)) && !view.events.length) {
    const parts = ["No data in this window. "];
    const latest = WARROOM.latest_ms;
    if (latest && view.window && (latest < view.window.from_ms || latest > view.window.to_ms)) {
      const from = new Date(latest - 3 * 3600e3).toISOString();
      const to = new Date(latest + 60e3).toISOString();
      parts.push(`The latest data you may read is at ${formatTime(latest)} UTC: `,
        link("show the 3 hours up to it", `${window.location.pathname}?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`), ". ");
    }
    const incidents = WARROOM.incidents || [];
    if (incidents.length) {
      parts.push("Open incidents: ");
      incidents.forEach((incident, i) => {
        if (i) parts.push(", ");
        const p = new URLSearchParams({ from: incident.from, to: incident.to || new Date().toISOString(), incident: String(incident.id) });
        parts.push(link(`${incident.title} (${incident.status})`, `${window.location.pathname}?${p}`));
      });
      parts.push(".");
    }
    items.push(notice("empty", parts, { dismiss: false }));
  }
  if (view.recordedClock && !view.dismissed.has("clock")) {
    const now = clockKey(view.clock);
    const then = clockKey(view.recordedClock);
    if (now !== then) {
      items.push(notice("clock", [`This link was made with ${describeClock(view.recordedClock)}; the times shown use the corrections in force now: ${describeClock(view.clock)}. `, link("clock page", "/clock/")]));
    }
  }
  box.replaceChildren(...items);
}

// ------------------------------------------------------------------ clock corrections in force

function correctionText(c) {
  const who = `${c.org} · ${c.source || "every agent"}${c.labels ? ` {${c.labels}}` : ""}`;
  const sign = c.offset_ms >= 0 ? "+" : "−";
  const drift = c.drift_ms_per_hour ? `, drift ${durationText(c.drift_ms_per_hour)}/h` : "";
  const unc = c.uncertainty_ms ? ` ± ${durationText(c.uncertainty_ms)}` : "";
  return `${who}: ${sign}${durationText(Math.abs(c.offset_ms))}${unc}${drift} (${c.origin}${c.method ? `, ${c.method}` : ""})`;
}

// "−2.7 s", "+46 ms": an offset as short as it reads.
function shortOffset(ms) {
  const sign = ms >= 0 ? "+" : "−";
  return Math.abs(ms) >= 1000 ? `${sign}${(Math.abs(ms) / 1000).toFixed(1)} s` : `${sign}${Math.round(Math.abs(ms))} ms`;
}

function activeCorrections(clock) {
  return ((clock && clock.corrections) || []).filter((c) => c.active !== false);
}

function clockKey(clock) {
  if (!clock) return "";
  return `${clock.aligned !== false}|${activeCorrections(clock).map((c) => c.id).sort().join(",")}`;
}

function describeClock(clock) {
  if (!clock || clock.aligned === false) return "corrections off";
  const active = activeCorrections(clock);
  return active.length ? active.map(correctionText).join("; ") : "no correction";
}

function renderClock() {
  const clock = view.clock;
  const chip = $("clock-chip");
  const active = activeCorrections(clock);
  const aligned = !clock || clock.aligned !== false;
  chip.textContent = !aligned ? "clock: corrections off" : active.length
    ? `clock: ${active.length} correction${active.length > 1 ? "s" : ""} applied (${active.map((c) => `${c.org} ${shortOffset(c.offset_ms)}`).join(", ")})`
    : "clock: no corrections";
  chip.classList.toggle("on", aligned && active.length > 0);
  const list = $("clock-list");
  list.replaceChildren(...(active.length ? active : [null]).map((c) => {
    const li = document.createElement("li");
    li.textContent = c ? correctionText(c) : "No correction is in force for the data you see.";
    return li;
  }));
  if (clock && clock.ordering_violations && clock.ordering_violations.length) list.appendChild(orderingItem(clock));
  $("align").checked = state.align;
  const recorded = $("clock-recorded");
  recorded.hidden = !view.recordedClock;
  if (view.recordedClock) recorded.textContent = `The link recorded: ${describeClock(view.recordedClock)}.`;
}

const ORDERING_SHOWN = 6;

// The known cause-and-effect pairs shown out of order: which clock is likely off, then each pair
// (cause → effect, with their organisations and how far the effect is shown early). Text only: names
// and organisations come from other organisations' data.
function orderingItem(clock) {
  const violations = clock.ordering_violations;
  const li = document.createElement("li");
  li.className = "error wr-ordering";
  const culprits = clock.ordering_culprits || [];
  const count = clock.ordering_count ?? violations.length;
  const head = document.createElement("p");
  head.className = "wr-ordering-head";
  head.textContent = `${count} known cause-and-effect pair${count === 1 ? " in this window appears" : "s in this window appear"} out of order`;
  if (culprits.length) {
    const [first] = culprits;
    const others = culprits.slice(1).map((c) => `${c.org} (${c.pairs})`).join(", ");
    head.textContent += `: likely ${first.org}'s clock (in ${first.pairs} of them)${others ? `; also ${others}` : ""}.`;
  }
  head.dataset.culprit = culprits.length ? culprits[0].org : "";
  const pairs = document.createElement("ul");
  pairs.className = "wr-ordering-pairs";
  for (const v of violations.slice(0, ORDERING_SHOWN)) {
    const item = document.createElement("li");
    item.dataset.rule = v.rule;
    const gap = Math.abs(v.shown_gap_ms);
    const shown = v.shown_gap_ms < 0 ? `shown ${durationText(gap)} before its cause` : `shown ${durationText(v.by_ms)} too soon after it`;
    item.textContent = `${v.earlier.org} ${v.earlier.name} → ${v.later.org} ${v.later.name}${v.node ? ` on ${v.node}` : ""} at ${formatTime(Date.parse(v.later.ts), false)}: ${shown}`;
    item.title = v.expected || v.rule;
    pairs.appendChild(item);
  }
  if (count > ORDERING_SHOWN) {
    const more = document.createElement("li");
    more.textContent = `… and ${count - ORDERING_SHOWN} more`;
    pairs.appendChild(more);
  }
  li.append(head, pairs);
  return li;
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

// Plotly.js (preloaded by the page) is evaluated once the first lanes and catalogue requests are on
// their way: evaluating it holds the page's one thread for about half a second.
let plotlyLoaded = null;
function loadPlotly() {
  plotlyLoaded ??= window.Plotly
    ? Promise.resolve(window.Plotly)
    : new Promise((resolve, reject) => {
        const script = document.createElement("script");
        script.src = $("plotly-js").href;
        script.addEventListener("load", () => {
          performance.mark("jointline:plotly");
          resolve(window.Plotly);
        });
        script.addEventListener("error", () => reject(new Error("Plotly.js could not be loaded")));
        document.head.appendChild(script);
      });
  return plotlyLoaded;
}

async function render() {
  const plotly = window.Plotly || (await loadPlotly()); // once loaded, drawn without a pause
  view.drawn = displayLanes();
  const figure = buildFigure({ lanes: view.drawn, marks: view.marks, hits: view.hits, highlight: view.highlight,
    window: view.window, colours, width: plotWidth(), ...analysisMarks() });
  view.geometry = figure.geometry;
  const plot = $("plot");
  // The plot's box holds the figure's own height (lanes × their heights): Plotly's autosize, on any
  // resize, reads the box's height, and without it falls back to the box's least (the CSS min-height).
  plot.style.height = `${figure.layout.height}px`;
  ignoreRelayout = true;
  await plotly.react(plot, figure.traces, figure.layout, {
    responsive: true, displaylogo: false, doubleClick: false, scrollZoom: true,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "resetScale2d", "toImage"],
  });
  ignoreRelayout = false;
  if (!plotReady) {
    plotReady = true;
    plot.on("plotly_relayout", onRelayout);
    plot.on("plotly_click", onPlotClick);
    // Plotly's own double-click in a lane (its reset is off: here it zooms out, as its hint says)
    plot.on("plotly_doubleclick", () => {
      if (performance.now() - lastDouble < 400) return;
      lastDouble = performance.now();
      zoomOut(2);
    });
  }
  renderTitles();
  renderEvents();
  renderHits();
  renderMarks();
  renderSelected();
  renderInView();
  renderNotices();
  renderClock();
  analysis.viewDrawn(view.drawn);
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
    org.style.color = readableColour(lane.title.colour);
    if (lane.placeholder) {
      title.classList.add("wr-placeholder");
      name.append(org, document.createTextNode(` · ${lane.title.signal} · not shared with you: ${lane.placeholder.described}`));
      const ask = document.createElement("a");
      ask.className = "wr-request";
      ask.href = lane.placeholder.url;
      ask.textContent = "request access";
      title.append(dot, name, ask);
      if (lane._index !== undefined) title.appendChild(laneControls(lane.spec, row.index, lane));
      box.appendChild(title);
      continue;
    }
    name.append(org, document.createTextNode(` · ${lane.title.signal} · ${lane.title.what}`));
    const unit = ["spans", "logs"].includes(lane.kind) || lane.status !== "ok" ? "" : unitLabel(lane);
    if (unit) {
      const unitSpan = document.createElement("span");
      unitSpan.className = "wr-unit";
      unitSpan.textContent = unit;
      name.appendChild(unitSpan);
    }
    title.append(dot, name);
    const note = laneNotes(lane).join(" · ");
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
    title.appendChild(laneControls(lane.spec, row.index, lane));
    box.appendChild(title);
    row.readout = value;
  }
}

// A lane's buttons are one toolbar and one stop of the tab order (its first button, or the one last
// used); the arrow keys, Home and End move between them. Tab then goes on to the next lane and, after
// the lanes, to the event table, instead of passing every button of every lane.
function laneControls(spec, index, lane = null) {
  const controls = document.createElement("span");
  controls.className = "wr-lane-controls";
  controls.setAttribute("role", "toolbar");
  controls.setAttribute("aria-label", `lane ${index + 1}: ${lane && lane.title ? `${lane.title.org} · ${lane.title.signal}` : spec}`);
  const button = (text, label, action) => {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = text;
    b.title = label;
    b.setAttribute("aria-label", label);
    b.tabIndex = controls.childElementCount ? -1 : 0;
    b.addEventListener("click", (event) => {
      event.stopPropagation();
      action();
    });
    controls.appendChild(b);
  };
  controls.addEventListener("keydown", onToolbarKey);
  const parsed = parseSpec(spec);
  // Per-node lines exist only where the nodes' series are shared one by one; an aggregate grant
  // shares the fleet's band only, so the control is not offered there.
  const levels = (lane && lane.group && lane.group.levels) || [];
  if (parsed.kind === "band" && !levels.includes("aggregate")) {
    button(hasFlag(spec, "nodes") ? "−nodes" : "+nodes", "per-node lines", () => replaceLane(index, withFlag(spec, "nodes", !hasFlag(spec, "nodes"))));
  }
  button("↑", "move up", () => moveLane(index, -1));
  button("↓", "move down", () => moveLane(index, 1));
  button(hasFlag(spec, "pin") ? "unpin" : "pin", "pin on top", () => replaceLane(index, withFlag(spec, "pin", !hasFlag(spec, "pin"))));
  button("✕", "remove lane", () => removeLane(index));
  return controls;
}

function onToolbarKey(event) {
  const buttons = [...event.currentTarget.querySelectorAll("button")];
  const at = buttons.indexOf(document.activeElement);
  const to = { ArrowRight: at + 1, ArrowDown: at + 1, ArrowLeft: at - 1, ArrowUp: at - 1, Home: 0, End: buttons.length - 1 }[event.key];
  if (to === undefined || at < 0) return;
  event.preventDefault();
  event.stopPropagation();
  const next = buttons[(to + buttons.length) % buttons.length];
  for (const b of buttons) b.tabIndex = b === next ? 0 : -1;
  next.focus();
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
  const canonical = canonicalSpec(spec) || spec;
  if (!hasLane(canonical)) setLanes([...state.lanes, canonical]);
}

function hasLane(spec) {
  const canonical = canonicalSpec(spec) || spec;
  return state.lanes.some((lane) => (canonicalSpec(lane) || lane) === canonical);
}

// Bring a lane in view to the eye: scroll to its title and flash it.
function showLane(spec) {
  const canonical = canonicalSpec(spec) || spec;
  const title = [...document.querySelectorAll(".wr-title")].find((t) => (canonicalSpec(t.dataset.spec) || t.dataset.spec) === canonical);
  if (!title) return;
  title.scrollIntoView({ block: "center", behavior: "smooth" });
  title.classList.remove("wr-flash");
  void title.offsetWidth;
  title.classList.add("wr-flash");
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

function zoomIn(factor = 2) {
  if (!view.window) return;
  const { from_ms: a, to_ms: b } = view.window;
  const centre = view.crosshairMs && view.crosshairMs > a && view.crosshairMs < b ? view.crosshairMs : (a + b) / 2;
  const half = (b - a) / factor / 2;
  setWindow(centre - half, centre + half, "zoom in");
}

function pan(fraction) {
  if (!view.window) return;
  const { from_ms: a, to_ms: b } = view.window;
  const shift = (b - a) * fraction;
  if (state.live) {
    state.live = false;
    $("live").checked = false;
  }
  setWindow(a + shift, b + shift, "panning");
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

// ------------------------------------------------------------------ analysis: what changed, stretches

const analysis = analysisPanels({
  getJson,
  addLane,
  hasLane,
  showLane,
  viewWindow: () => view.window,
  aligned: () => state.align,
  changed: () => writeUrl(),
  redraw: () => {
    if (view.window) render();
  },
});

function laneOfSpec(spec) {
  return spec ? view.drawn.find((lane) => !lane.placeholder && (canonicalSpec(lane.spec) || lane.spec) === spec) : null;
}

// What the figure draws of the analysis: the selected stretch on its lane, the onsets on theirs.
function analysisMarks() {
  const marks = analysis.figureMarks();
  const stretch = marks.stretch && laneOfSpec(marks.stretch.spec);
  return {
    stretch: stretch ? { lane: stretch, from_ms: marks.stretch.from_ms, to_ms: marks.stretch.to_ms } : null,
    onsets: marks.onsets.map((o) => ({ ...o, lane: laneOfSpec(o.spec) })).filter((o) => o.lane),
  };
}

// Drag across a lane to select a stretch of it, in select mode (the Select button) or with Shift held;
// any other drag zooms, as before. The drag is taken before Plotly sees it.
let drag = null;
const MIN_DRAG_PX = 4;

function laneRowAt(clientY) {
  if (!view.geometry) return null;
  const y = clientY - $("figure").getBoundingClientRect().top - MARGIN.t;
  return view.geometry.rows.find((row) => row.lane && y >= row.top && y <= row.top + row.height) || null;
}

function onDragStart(event) {
  if (event.button !== 0 || !(state.selecting || event.shiftKey)) return;
  if (event.target.closest(".wr-title, button, a, input, select")) return;
  const t = timeAt(event.clientX);
  const row = laneRowAt(event.clientY);
  if (t === null || !row) return;
  event.preventDefault();
  event.stopPropagation();
  const lane = row.lane;
  if (lane.placeholder || lane.status !== "ok" || !analysis.seriesKind(lane.kind)) {
    setStatus("statistics are of series lanes: drag across a line, rate, band, sum or heatmap lane", true);
    return;
  }
  drag = { row, startX: event.clientX, startMs: t, endX: event.clientX, endMs: t };
  const band = stretchBand();
  band.style.top = `${MARGIN.t + row.top}px`;
  band.style.height = `${row.height}px`;
  moveBand(band);
  band.hidden = false;
  document.addEventListener("mousemove", onDragMove, true);
  document.addEventListener("mouseup", onDragEnd, true);
}

function stretchBand() {
  let band = $("stretch-band");
  if (!band) {
    band = document.createElement("div");
    band.id = "stretch-band";
    band.className = "wr-stretch-band";
    band.hidden = true;
    $("figure").appendChild(band);
  }
  return band;
}

function moveBand(band) {
  const left = $("figure").getBoundingClientRect().left;
  band.style.left = `${Math.min(drag.startX, drag.endX) - left}px`;
  band.style.width = `${Math.abs(drag.endX - drag.startX)}px`;
}

function clampedTime(clientX) {
  const area = plotArea();
  const left = $("figure").getBoundingClientRect().left + area.left;
  const x = Math.max(left, Math.min(left + area.width, clientX));
  return { x, t: timeAt(Math.min(x, left + area.width - 0.01)) ?? area.range[1] };
}

function onDragMove(event) {
  if (!drag) return;
  event.preventDefault();
  event.stopPropagation();
  const { x, t } = clampedTime(event.clientX);
  drag.endX = x;
  drag.endMs = t;
  moveBand(stretchBand());
}

function onDragEnd(event) {
  document.removeEventListener("mousemove", onDragMove, true);
  document.removeEventListener("mouseup", onDragEnd, true);
  if (!drag) return;
  event.preventDefault();
  event.stopPropagation();
  const { row, startX, startMs, endX, endMs } = drag;
  drag = null;
  stretchBand().hidden = true;
  if (Math.abs(endX - startX) < MIN_DRAG_PX || endMs === startMs) return;
  analysis.selectStretch({ spec: row.lane.spec, lane: row.lane, from_ms: Math.min(startMs, endMs), to_ms: Math.max(startMs, endMs) });
}

function setSelecting(on) {
  state.selecting = on;
  $("select-mode").setAttribute("aria-pressed", String(on));
  $("select-mode").classList.toggle("on", on);
  $("figure").classList.toggle("wr-selecting", on);
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
  row.tabIndex = 0;
  row.setAttribute("aria-label", `${formatTime(e.t)} ${e.org} ${e.severity} ${e.name}: select and centre the view on it`);
  row.addEventListener("click", () => selectEvent(e, { centre: true }));
  row.addEventListener("keydown", (event) => {
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      selectEvent(e, { centre: true });
    }
  });
  return row;
}

// How many events the list's filters match in the whole window (the server counts them, for every
// filter). A later page in time order is asked from its cursor on: the pages before it were full, and
// the events of the cursor's millisecond they showed are counted once.
function eventTotal(events, cursor) {
  if (typeof events.total !== "number") return null;
  if (!cursor) return events.total;
  return view.evPage * EVENT_PAGE + Math.max(0, events.total - cursor.ids.length);
}

function renderEvents() {
  const body = $("event-rows");
  body.replaceChildren(...view.events.map(eventRow));
  const total = view.eventsTotal;
  const first = view.evPage * EVENT_PAGE;
  const shown = view.events.length ? `${first + 1}–${first + view.events.length}` : "0";
  const of = total !== null && total !== undefined ? ` of ${view.eventsTotalExact ? "" : "at least "}${total.toLocaleString("en")}` : view.eventsMore || view.evPage ? " of more" : "";
  const ranked = state.ev.order === "severity";
  $("event-count").textContent = `(${shown}${of}, ${ranked ? "most severe first" : "in time order"})`;
  $("ev-page").textContent = view.evPage || view.eventsMore ? `page ${view.evPage + 1}` : "";
  $("ev-prev").textContent = ranked ? "← more severe" : "← earlier";
  $("ev-next").textContent = ranked ? "less severe →" : "later →";
  $("ev-prev").disabled = view.evPage === 0;
  $("ev-next").disabled = !view.eventsMore;
  const order = $("ev-order");
  order.value = state.ev.order;
  if (view.orderRefused) {
    order.disabled = true;
    order.title = "this server lists events in time order only";
  }
}

function eventPage(delta) {
  if (delta > 0 && !state.ev.order) {
    const last = view.events[view.events.length - 1];
    if (!last) return;
    view.evCursors[view.evPage + 1] = { t: last.t, ids: view.events.filter((e) => e.t === last.t).map((e) => e.id) };
  }
  view.evPage = Math.max(0, view.evPage + delta);
  refresh({ reason: "events" }).then(() => $("event-rows").closest(".wr-events").scrollIntoView({ block: "nearest" }));
}

function hitItem(e) {
  const item = document.createElement("li");
  item.dataset.id = String(e.id);
  item.tabIndex = 0;
  item.addEventListener("keydown", (event) => {
    if (event.key === "Enter") selectEvent(e, { centre: true });
  });
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
  const numbers = noteNumbers(view.marks);
  $("mark-list").replaceChildren(...view.marks.map((m) => {
    const item = hitItem(m);
    if (m.annotation) {
      const number = document.createElement("span");
      number.className = "wr-note-number";
      number.textContent = String(numbers.get(m.id));
      item.querySelector(".wr-hit-head").prepend(number);
      item.classList.add("wr-annotation");
    }
    // an incident's notes are listed even when the window does not hold them: say where they are
    if (view.window && (m.t < view.window.from_ms || m.t >= view.window.to_ms)) {
      const where = document.createElement("div");
      where.className = "wr-outside";
      where.textContent = m.t < view.window.from_ms ? "before this window" : "after this window";
      item.appendChild(where);
    }
    return item;
  }));
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
  when.textContent = `${formatTime(e.t)}${e.end_t ? ` – ${formatTime(e.end_t)}` : ""}${clockNote(e)}`;
  const where = document.createElement("div");
  where.textContent = labelText(e.resource);
  const message = document.createElement("pre");
  message.className = "wr-message";
  message.textContent = e.message || "";
  box.append(head, meta, when, where, message);
  const attributes = attributeList(e.attributes);
  if (attributes) box.appendChild(attributes);
}

// An event's attributes as a definition list (a detection's families and the signals that fired,
// an XID's code, a session's outcome), as text: they come from other organisations.
function attributeList(attributes) {
  const entries = Object.entries(attributes || {}).filter(([, value]) => value !== null && value !== "");
  if (!entries.length) return null;
  const list = document.createElement("dl");
  list.className = "wr-attributes";
  for (const [key, value] of entries) {
    const term = document.createElement("dt");
    term.textContent = key;
    const detail = document.createElement("dd");
    detail.textContent = typeof value === "object" ? JSON.stringify(value) : String(value);
    list.append(term, detail);
  }
  return list;
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
    item.append(label, kinds, laneControls(spec, index, lane));
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
  const capacities = capacityMetrics();
  const named = needle ? familiesNamed(needle) : null;
  for (const family of catalogue.events) {
    if (labelFilter.length) continue; // event lanes have no series labels to match
    // a family matches by its organisation, signal or kind, or by the name or text of its events
    const names = named && named.get(`${family.org}|${family.signal}|${family.kind}`);
    if (needle && !names && !`${family.org} ${family.signal} ${family.kind} events`.toLowerCase().includes(needle)) continue;
    const found = names ? `: ${[...names].slice(0, 4).join(", ")}${names.size > 4 ? ", …" : ""}` : "";
    entries.push({ org: family.org, signal: family.signal, text: `${family.kind} events${found} (${family.count} in window)`,
      kinds: family.with_duration ? ["spans", "logs"] : ["logs"], make: (kind) => formatSpec({ kind, org: family.org, signal: family.signal, what: "", labels: [], capacity: "", flags: [] }) });
  }
  for (const group of catalogue.series) {
    // A capacity is drawn with the lane it bounds (dashed), not as a lane of its own.
    if (capacities.has(`${group.org}/${group.metric}`)) continue;
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
    // whole names, wrapped after an underscore where they must (receive and transmit stay apart)
    entry.text.split("_").forEach((part, i) => {
      if (i) name.append("_", document.createElement("wbr"));
      name.append(part);
    });
    name.title = `${entry.org} · ${entry.signal} · ${entry.text}`;
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

// The event families whose events' names or text hold ``needle`` in the window: asked of the event
// search once per text and window (the catalogue lists families, not their event names), then the
// picker is drawn again. Null while the answer is awaited.
const familySearches = new Map();
const FAMILY_SEARCH_MIN = 2;

function familiesNamed(needle) {
  if (needle.length < FAMILY_SEARCH_MIN) return null;
  const key = `${windowParams()}|${needle}`;
  if (familySearches.has(key)) return familySearches.get(key);
  familySearches.set(key, null);
  clearTimeout(familiesNamed.timer);
  if (familiesNamed.pending) familySearches.delete(familiesNamed.pending); // typed on: never asked
  familiesNamed.pending = key;
  familiesNamed.timer = setTimeout(async () => {
    familiesNamed.pending = null;
    try {
      const answer = await getJson(`${API}/events?${windowParams()}&limit=200&q=${encodeURIComponent(needle)}`);
      const found = new Map();
      for (const e of answer.events || []) {
        const family = `${e.org}|${e.signal}|${e.kind}`;
        if (!found.has(family)) found.set(family, new Set());
        found.get(family).add(e.name);
      }
      familySearches.set(key, found);
    } catch {
      familySearches.delete(key);
      return;
    }
    if (!$("picker").hidden && $("pick-text").value.trim().toLowerCase() === needle) renderCatalogue();
  }, 250);
  return null;
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
  $("select-mode").addEventListener("click", () => setSelecting(!state.selecting));
  $("figure").addEventListener("mousedown", onDragStart, true);
  // Double-click zooms out anywhere on the lanes (Plotly's own double-click, which it hints at, is off).
  const doubleClick = () => {
    if (performance.now() - lastDouble < 400) return;
    lastDouble = performance.now();
    zoomOut(2);
  };
  // While Plotly drags, a cover it lays over the page takes the mouse-up, so a double-click in a lane
  // reaches the document, not the figure: it counts where the pointer is.
  document.addEventListener("dblclick", (event) => {
    const r = $("figure").getBoundingClientRect();
    if (event.clientX >= r.left && event.clientX <= r.right && event.clientY >= r.top && event.clientY <= r.bottom) doubleClick();
  });
  for (const id of ["from", "to"]) {
    $(id).addEventListener("keydown", (event) => {
      if (event.key === "Enter") $("apply").click();
    });
  }
  $("figure").addEventListener("keydown", onFigureKey);
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape") closePanels();
  });
  $("ev-prev").addEventListener("click", () => eventPage(-1));
  $("ev-next").addEventListener("click", () => eventPage(1));
  $("clock-chip").addEventListener("click", () => {
    const panel = $("clock-panel");
    panel.hidden = !panel.hidden;
    $("clock-chip").setAttribute("aria-expanded", String(!panel.hidden));
  });
  $("align").addEventListener("change", () => {
    state.align = $("align").checked;
    refresh({ reason: state.align ? "clock corrections on" : "clock corrections off" });
  });
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
      } else if (plotReady && view.geometry) {
        // a new width only: the height stays the lanes' (a plain Plots.resize would autosize it too)
        Plotly.relayout($("plot"), { width: $("plot").clientWidth, height: view.geometry.plotHeight + MARGIN.t + MARGIN.b });
      }
    }, 400);
  }).observe($("figure"));
}

// Keys on the lanes: arrows pan a quarter of the window, + and − zoom by two, Home / End jump a window.
function onFigureKey(event) {
  if (event.target.closest("button, a, input, select")) return;
  const keys = { ArrowLeft: () => pan(-PAN_FRACTION), ArrowRight: () => pan(PAN_FRACTION), "+": () => zoomIn(2), "=": () => zoomIn(2),
    "-": () => zoomOut(2), "−": () => zoomOut(2), _: () => zoomOut(2), PageUp: () => pan(-1), PageDown: () => pan(1) };
  const action = keys[event.key];
  if (!action) return;
  event.preventDefault();
  action();
}

// Escape closes what is open: the forms, the clock panel, the lane picker, then the selection.
function closePanels() {
  const open = [["incident-form", () => toggleForm("incident-form", false)], ["annotate-form", () => toggleForm("annotate-form", false)],
    ["clock-panel", () => { $("clock-panel").hidden = true; $("clock-chip").setAttribute("aria-expanded", "false"); }],
    ["picker", () => $("toggle-picker").click()], ["changes-panel", () => analysis.close()]].filter(([id]) => !$(id).hidden);
  if (open.length) {
    for (const [, close] of open) close();
    return;
  }
  if (state.sel) {
    state.sel = null;
    view.highlight = null;
    writeUrl();
    render();
  }
}

// ------------------------------------------------------------------ incidents, annotations, permalinks

const ROLE = document.querySelector(".wr-controls").dataset.role || "";
const OWN_ORG = document.querySelector(".wr-controls").dataset.org || "";
const CAN_WRITE = ["analyst", "admin"].includes(ROLE);

// The view's state as a permalink stores it: absolute window, lanes in order, search and filters.
function linkState() {
  const linked = { from: state.from, to: state.to, lanes: chosenLanes(), ...analysis.linkState() };
  if (state.mine) linked.mine = true;
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

// Every organisation with a lane in view is invited by default (the server adds the creator's own);
// the form lists all the others, to invite whoever is needed.
function viewOrganisations() {
  const slugs = new Set(state.lanes.map((l) => parseSpec(l)).filter(Boolean).map((s) => s.org));
  slugs.delete(OWN_ORG);
  return [...slugs].filter((slug) => slug in colours).sort();
}

function fillParticipants() {
  const box = $("incident-participants");
  const legend = box.querySelector("legend");
  const inView = new Set(viewOrganisations());
  const boxes = ORGS.filter((o) => !ownOrg(o.slug)).map((o) => {
    const label = document.createElement("label");
    const input = document.createElement("input");
    input.type = "checkbox";
    input.name = "participants";
    input.value = o.slug;
    input.checked = inView.has(o.slug);
    label.append(input, document.createTextNode(` ${o.slug}`));
    label.title = o.name;
    return label;
  });
  box.replaceChildren(legend, ...boxes);
}

function chosenParticipants() {
  return [...document.querySelectorAll("#incident-participants input:checked")].map((i) => i.value);
}

async function createIncident(title) {
  const linked = linkState();
  const incident = await postJson("/api/v1/incidents", {
    // the incident keeps every lane drawn, the opener's own included: it is the record of this view
    title, window_start: linked.from, window_end: linked.to, participants: chosenParticipants(), lanes: [...state.lanes],
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
    if ($("incident-form").hidden) fillParticipants();
    toggleForm("incident-form", $("incident-form").hidden);
    if (!$("incident-form").hidden) $("incident-new-title").focus();
  });
  $("incident-cancel").addEventListener("click", () => toggleForm("incident-form", false));
  onTextSubmit("incident-form", "incident-new-title", "opening the incident…", "incident not opened", createIncident);
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
  onTextSubmit("annotate-form", "annotate-text", "annotating…", "annotation not added", async (text) => {
    await addAnnotation(text, $("annotate-time").value.trim());
    $("annotate-text").value = "";
    toggleForm("annotate-form", false);
    await refresh({ reason: "annotated" });
  });
}

// A form of one text field: on submit, unless the text is blank, say `busy` and run `action(text)`;
// a failure is said after `failed`.
function onTextSubmit(formId, inputId, busy, failed, action) {
  $(formId).addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = $(inputId).value.trim();
    if (!text) return;
    setStatus(busy);
    try {
      await action(text);
    } catch (error) {
      setStatus(`${failed}: ${error.message}`, true);
    }
  });
}

// The clock a permalink recorded when it was made, to say when the corrections in force differ.
async function recordedClock(id) {
  try {
    const link = await getJson(`/api/v1/permalinks/${encodeURIComponent(id)}`);
    view.recordedClock = link.state && link.state.clock ? link.state.clock : null;
    if (view.geometry) {
      renderNotices();
      renderClock();
    }
  } catch {
    view.recordedClock = null;
  }
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

// The first view's lanes are asked for at once, beside the catalogue and before Plotly.js is evaluated
// (it holds the page's one thread for about half a second): the page names the default lanes when
// the URL names none. Only a link naming series by id (resolved by the catalogue), the rule "plus my
// related lanes" (the viewer's lanes in the catalogue) or a URL whose lanes are all refused waits for
// the catalogue first. The first drawing waits for both.
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
  const waitsForCatalogue = state.legacySeries.length > 0 || state.mine || (!state.lanes.length && !WARROOM.default_lanes);
  if (!waitsForCatalogue) {
    if (!state.lanes.length) state.lanes = [...WARROOM.default_lanes];
    firstView();
  }
  const legacy = state.legacySeries.length ? `&series=${state.legacySeries.join(",")}` : "";
  catalogueAnswer = getJson(`${API}/catalogue?${windowParams()}${legacy}`);
  catalogueAnswer.catch(() => {}); // said below and by the first drawing
  loadPlotly().catch(() => {}); // a failure is said by the first drawing
  try {
    catalogue = await catalogueAnswer;
  } catch (error) {
    setStatus(`error: ${error.message}`, true);
    return;
  }
  if (!waitsForCatalogue) return;
  if (!state.lanes.length && catalogue.from_series && catalogue.from_series.length) state.lanes = catalogue.from_series;
  if (!state.lanes.length) state.lanes = catalogue.defaults;
  firstView();
}

// The view's first request, once its lanes are known.
function firstView() {
  view.familiesWindow = windowParams(); // the catalogue asked for by main() counts this window's events
  applyMineRule();
  renderUnshared();
  state.lanes = orderPinned(state.lanes);
  if (state.live) setLive(true);
  refresh();
  if (state.permalink) recordedClock(state.permalink);
  if (state.incident) showIncident(state.incident);
}

// What the browser tests (and a curious engineer in the console) read: the view state and its data.
window.jointline = { state, view };
main();
