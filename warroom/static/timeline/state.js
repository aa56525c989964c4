// The war room's state, in one module: every other module of the page reads and changes these objects
// and keeps no mutable state of its own (tests/test_static_modules.py checks it).
//
//   state    what the view is: window, lanes in order with their kinds and flags, live mode, search,
//            selected event, event-list filters. It lives in the URL (readUrl, writeUrl), so a reload
//            or a pasted link reopens the same view.
//   view     what the server answered for it and what is drawn from that.
//   session  what this page holds while it is open: the catalogue, the request in flight, timers.
//   panels   what the side panels that follow the view remember between their answers.
//   cycle    the view's refresh and redraw, bound by timeline.js (see below).
//
// `state` and `view` are also `window.jointline.state` and `.view`, which the browser tests (and a
// curious engineer in the console) read. This module reads nothing of the page when it is imported.
import { canonicalSpec, orderPinned, parseSpec, specProblem } from "./spec.js";

export const state = {
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
  legacySeries: [],
  incident: null,
  unsharedLanes: [],
  permalink: null,
  selecting: false,
};

export const view = {
  lanes: [], drawn: [], marks: [], hits: [], events: [], highlight: null, window: null, geometry: null,
  clock: null, evPage: 0, evCursors: [null], dismissed: new Set(),
};

export const session = {
  catalogue: null,
  catalogueAnswer: null, // the first catalogue request, made by main()
  firstLanes: null, // the first view's lanes request, made by first_request.js: { url, answer } or null
  firstLanesSettled: null, // settled once that request has answered (or failed): its lists wait for it
  analysis: null, // the analysis panels (analysis/warroom.js), bound to this page by timeline.js
  plotlyLoaded: null,
  sharing: null, // incidents.js once timeline.js has loaded it (on first use)
  plotReady: false,
  ignoreRelayout: false,
  inflight: null,
  zoomTimer: null,
  liveTimer: null,
  lastDouble: 0,
  drag: null, // a stretch being dragged across a lane
  // The picker's event families whose events' names or text hold a typed text, per text and window.
  familySearches: new Map(),
  familySearch: { pending: null, timer: null },
};

export const panels = {
  checkpoints: { asked: "" },
  forecast: { jobs: [], requested: 0, shownChart: null, before: null },
};

// The view's cycle, both in timeline.js: refresh({ reason }) asks the server again and draws the
// answer, render() draws what `view` holds. The other modules reach them through here, never by
// importing timeline.js: a module imported by timeline.js that imported it back would make a cycle, and
// collectstatic names each module by a hash of its text with its imports' hashed names in it, which a
// cycle never settles (nor a chain of imports deeper than its passes; tests/test_static_modules.py).
export const cycle = {
  refresh: async () => {},
  render: async () => {},
};

// ------------------------------------------------------------------ the URL

export function readUrl() {
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
  if (session.analysis) session.analysis.readParams(p); // bound by timeline.js (first_request.js reads first)
}

// The first view's lanes when they are known without the catalogue (the URL's, else the page's default
// lanes ``defaults``), in drawing order; null when the first view waits for the catalogue: a link
// naming series by id, the rule "plus my related lanes", or lanes all refused and no defaults.
export function knownFirstLanes(defaults) {
  if (state.legacySeries.length || state.mine || (!state.lanes.length && !defaults)) return null;
  return orderPinned(state.lanes.length ? state.lanes : [...defaults]);
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

// Parameters this page owns; any other (incident, permalink, …) is kept as it came. The analysis
// panels write (and first delete) their own.
// Query parameters the analysis panels own (analysis/warroom.js; analysis_host.js keeps them until the
// panels' modules are loaded).
export const ANALYSIS_PARAMS = ["changes", "changes_from", "changes_to", "baseline_from", "baseline_to", "stretch", "stretch_from", "stretch_to"];
const OWN_PARAMS = ["from", "to", "lane", "lanes", "live", "mine", "q", "sel", "align", "clock", ...Object.keys(state.ev).map((k) => `ev_${k}`)];

export function writeUrl() {
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
  session.analysis.writeParams(p);
  const url = `${window.location.pathname}?${p}`;
  if (url !== `${window.location.pathname}${window.location.search}`) window.history.replaceState(null, "", url);
}

export function windowParams() {
  return `from=${encodeURIComponent(state.from)}&to=${encodeURIComponent(state.to)}${state.align ? "" : "&align=off"}`;
}

export function eventFilterParams() {
  const p = new URLSearchParams();
  for (const key of ["org", "signal", "kind", "severity"]) if (state.ev[key]) p.set(key, state.ev[key]);
  if (state.ev.text) p.set("q", state.ev.text);
  if (state.ev.order) p.set("order", state.ev.order);
  return p.toString();
}

// The lanes of the view chosen by someone (in the URL and in links made from it): all but those the
// rule "plus my related lanes" added for this viewer.
export function chosenLanes() {
  return state.lanes.filter((lane) => !state.ruleLanes.includes(lane));
}

// Metrics that are another group's capacity (in the catalogue): drawn with the lane they bound, not as
// lanes of their own.
export function capacityMetrics() {
  const catalogue = session.catalogue;
  return new Set(((catalogue && catalogue.series) || []).filter((g) => g.capacity).map((g) => `${g.org}/${g.capacity}`));
}
