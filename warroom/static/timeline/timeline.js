// Jointline war room: lanes of five organisations on one time axis, drawn from the scoped API.
//
// This module starts the page and runs its one cycle: ask the server for the view (refresh), then draw
// it (render), again on every change and, in live mode, on a timer. It is the only module that imports
// the others' behaviours; each of them holds one behaviour around the one state object (state.js: the
// URL state, what is drawn from it, what the page holds while open) and reaches the cycle through
// `cycle` there: the lane titles and their toolbars (lane_titles.js), placeholders for what is not
// shared (placeholders.js), the events (events.js), the picker (picker.js), notices and clock
// (notices.js, clock.js), the toolbar and keys (controls.js), the window (zoom.js), the crosshair
// (readout.js), links and incidents (incidents.js), the analysis panels (analysis_host.js, analysis/).
// What the first view does not use is loaded on first use, by a dynamic import: links and incidents,
// the analysis panels, the scale forecast; the first lanes request leaves from first_request.js.
// Data never reaches the DOM as HTML: text nodes only, and Plotly's hover text is escaped (format.js).
import { analysisOnDemand, analysisOverlay, bindSelecting } from "./analysis_host.js";
import { getJson, lanesUrl } from "./api.js";
import { renderClock } from "./clock.js";
import { bindControls } from "./controls.js";
import { bindEventList, clearSelection, EVENT_PAGE, eventTotal, findEvent, onPlotClick, renderEvents, renderHits, renderMarks, renderSelected } from "./events.js";
import { buildFigure } from "./figure.js";
import { takeFirstLanes } from "./first_request.js";
import { formatSpan } from "./format.js";
import { renderTitles } from "./lane_titles.js";
import { applyMineRule, recordedClock, renderNotices } from "./notices.js";
import { API, $, CAN_WRITE, colours, ORGS, setStatus, WARROOM } from "./page.js";
import { bindPicker, fillSelect, renderCatalogue, renderInView } from "./picker.js";
import { displayLanes, renderUnshared } from "./placeholders.js";
import { bindCrosshair } from "./readout.js";
import { orderPinned } from "./spec.js";
import { cycle, eventFilterParams, knownFirstLanes, readUrl, session, state, view, windowParams, writeUrl } from "./state.js";
import { onRelayout, plotWidth, syncTimeInputs, zoomOutOnDoubleClick } from "./zoom.js";

const LIVE_REFRESH_MS = 15000;
const SIGNALS = ["application", "scheduler", "network", "storage", "gpu", "host", "other"];

// ------------------------------------------------------------------ asking

// In time order the event list pages forward in time: page k starts at the time of the last event of
// page k-1 (events of that very millisecond that page k-1 showed are left out of page k, so it asks for
// 50 more; the first page asks for the page alone). Most severe first, page k is the k-th slice of the
// ranking (offset).
function eventsUrl() {
  if (state.ev.order === "severity") {
    return `${API}/events?${windowParams()}&limit=${EVENT_PAGE}&offset=${view.evPage * EVENT_PAGE}&${eventFilterParams()}`;
  }
  const cursor = view.evCursors[view.evPage];
  const from = cursor ? `from=${encodeURIComponent(new Date(cursor.t).toISOString())}&to=${encodeURIComponent(state.to)}${state.align ? "" : "&align=off"}` : windowParams();
  return `${API}/events?${from}&limit=${cursor ? EVENT_PAGE + 50 : EVENT_PAGE}&${eventFilterParams()}`;
}

async function refresh({ reason = "" } = {}) {
  writeUrl();
  if (session.inflight) session.inflight.abort();
  const controller = new AbortController();
  session.inflight = controller;
  const signal = controller.signal;
  const started = performance.now();
  setStatus(reason ? `${reason}…` : "loading…");
  const lanesAsked = lanesUrl(state.lanes, plotWidth());
  if (view.queriedWindow !== windowParams() || view.queriedFilters !== eventFilterParams()) {
    view.evPage = 0;
    view.evCursors = [null];
  }
  // The first view's lanes were started early (first_request.js). Its event list (and main()'s
  // catalogue) are asked for once they have answered, and its figure is drawn without waiting for
  // them: asked beside the lanes, they slowed the lanes answer on the server (decision 0089).
  const first = takeFirstLanes(lanesAsked);
  const lanesAnswer = first || getJson(lanesAsked, signal);
  if (first) session.firstLanesSettled = lanesAnswer.then(() => {}, () => {});
  const listed = first ? session.firstLanesSettled : Promise.resolve();
  try {
    const listAnswers = Promise.all([
      listed.then(() => getJson(eventsUrl(), signal)),
      view.familiesWindow !== windowParams() ? getJson(`${API}/catalogue?${windowParams()}`, signal).catch(() => null) : null,
    ]);
    listAnswers.catch(() => {}); // said below, once awaited
    const [lanes, hits, selected, annotated] = await Promise.all([
      lanesAnswer,
      state.q ? getJson(`${API}/events?${windowParams()}&limit=200&q=${encodeURIComponent(state.q)}`, signal) : null,
      state.sel && !findEvent(state.sel) ? getJson(`${API}/events?id=${state.sel}`, signal).catch(() => null) : null,
      state.incident ? getJson(`/api/v1/incidents/${state.incident}/annotations`, signal).catch(() => null) : null,
    ]);
    if (first && !signal.aborted) {
      showLanes(lanes, hits, selected, annotated);
      await drawFigure();
    }
    const [events, counted] = await listAnswers;
    session.catalogue ??= await session.catalogueAnswer; // the first drawing's notices and picker read it
    if (signal.aborted) return;
    if (counted) {
      // the picker's event families, with their counts in the new window
      session.catalogue.events = counted.events;
      view.familiesWindow = windowParams();
      if (!$("picker").hidden) renderCatalogue();
    }
    if (!first) showLanes(lanes, hits, selected, annotated);
    view.queriedWindow = windowParams();
    view.queriedFilters = eventFilterParams();
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
    if (!first) view.highlight = state.sel ? findEvent(state.sel) : null;
    await (first ? drawLists() : render());
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
    if (session.inflight === controller) session.inflight = null;
  }
}

// What the figure draws of an answer: the lanes, their marks and the incident's notes, search hits and
// the selected event.
function showLanes(lanes, hits, selected, annotated) {
  view.lanes = lanes.lanes;
  view.clock = lanes.clock;
  view.marks = [...lanes.marks, ...annotationMarks(annotated)].sort((a, b) => a.t - b.t);
  view.window = { from_ms: lanes.from_ms, to_ms: lanes.to_ms };
  view.hits = hits ? hits.events : [];
  view.hitsMore = hits ? hits.more : false;
  if (selected && selected.events.length) view.selectedEvent = selected.events[0];
  view.highlight = state.sel ? findEvent(state.sel) : null;
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

// ------------------------------------------------------------------ live mode

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
  clearTimeout(session.liveTimer);
  session.liveTimer = setTimeout(() => {
    if (!state.live) return; // switched off by a zoom or a pan: the next setLive(true) starts again
    if (!document.hidden) refresh({ reason: "live" });
    scheduleLive();
  }, liveDelay());
}

function setLive(on) {
  state.live = on;
  clearTimeout(session.liveTimer);
  if (on) {
    const span = view.window ? view.window.to_ms - view.window.from_ms : 3 * 3600e3;
    state.from = `now-${Math.round(span / 1000)}s`;
    state.to = "now";
    scheduleLive();
  }
  syncTimeInputs();
}

// ------------------------------------------------------------------ drawing

// Plotly.js (preloaded by the page) is evaluated once the first lanes and catalogue requests are on
// their way: evaluating it holds the page's one thread for about half a second.
function loadPlotly() {
  session.plotlyLoaded ??= window.Plotly
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
  return session.plotlyLoaded;
}

// The whole view: its figure, then the lists beside and below it.
async function render() {
  await drawFigure();
  drawLists();
}

// The figure (every lane, its title and readout), the marks and hits beside it, the clock chip.
async function drawFigure() {
  const plotly = window.Plotly || (await loadPlotly()); // once loaded, drawn without a pause
  view.drawn = displayLanes();
  const figure = buildFigure({ lanes: view.drawn, marks: view.marks, hits: view.hits, highlight: view.highlight,
    window: view.window, colours, width: plotWidth(), overlay: analysisOverlay() });
  view.geometry = figure.geometry;
  const plot = $("plot");
  // The plot's box holds the figure's own height (lanes × their heights): Plotly's autosize, on any
  // resize, reads the box's height, and without it falls back to the box's least (the CSS min-height).
  plot.style.height = `${figure.layout.height}px`;
  session.ignoreRelayout = true;
  await plotly.react(plot, figure.traces, figure.layout, {
    responsive: true, displaylogo: false, doubleClick: false, scrollZoom: true,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "resetScale2d", "toImage"],
  });
  session.ignoreRelayout = false;
  if (!session.plotReady) {
    session.plotReady = true;
    plot.on("plotly_relayout", onRelayout);
    plot.on("plotly_click", onPlotClick);
    // Plotly's own double-click in a lane (its reset is off: here it zooms out, as its hint says)
    plot.on("plotly_doubleclick", zoomOutOnDoubleClick);
  }
  renderTitles();
  renderHits();
  renderMarks();
  renderSelected();
  renderClock();
  session.analysis.viewDrawn(view.drawn);
  document.body.dataset.window = `${view.window.from_ms},${view.window.to_ms}`;
  // every lane drawn; ``renders`` below counts the whole view, its lists too
  document.body.dataset.lanesDrawn = String(Number(document.body.dataset.lanesDrawn || 0) + 1);
}

// The event list, the picker's lanes in view and the notices (which read the catalogue).
function drawLists() {
  renderEvents();
  renderInView();
  renderNotices();
  document.body.dataset.ready = "1";
  document.body.dataset.renders = String(Number(document.body.dataset.renders || 0) + 1);
}

// Escape closes what is open: the forms, the clock panel, the lane picker, then the selection.
function closePanels() {
  const hide = (form) => () => loadSharing().then((sharing) => sharing.toggleForm(form, false)); // open: loaded
  const open = [["incident-form", hide("incident-form")], ["annotate-form", hide("annotate-form")],
    ["clock-panel", () => { $("clock-panel").hidden = true; $("clock-chip").setAttribute("aria-expanded", "false"); }],
    ["picker", () => $("toggle-picker").click()], ["changes-panel", () => session.analysis.close()]].filter(([id]) => !$(id).hidden);
  if (open.length) {
    for (const [, close] of open) close();
    return;
  }
  if (state.sel) clearSelection();
}

// ------------------------------------------------------------------ starting

function bindPage() {
  cycle.refresh = refresh;
  cycle.render = render;
  session.analysis = analysisOnDemand(() => import("./analysis/warroom.js"));
  readUrl();
  syncTimeInputs();
  bindControls({ setLive });
  bindSelecting();
  bindCrosshair();
  bindEventList();
  bindPicker();
  // Sharing the view (incidents.js) loads on the first use of its buttons.
  $("create-incident").hidden = !CAN_WRITE;
  $("annotate").hidden = !(CAN_WRITE && state.incident);
  for (const id of ["copy-link", "create-incident", "annotate"]) onFirstUse($(id), loadSharing);
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape") closePanels();
  });
  // The scale forecast (its module and styles) loads on first use, not on the first view's path.
  onFirstUse($("toggle-forecast"), () => Promise.all([import("./analysis/forecast_panel.js"), stylesheet($("toggle-forecast").dataset.styles)]));
  fillSelect($("pick-org"), ORGS.map((o) => o.slug));
  fillSelect($("ev-org"), ORGS.map((o) => o.slug));
  fillSelect($("pick-signal"), SIGNALS);
  fillSelect($("ev-signal"), SIGNALS);
  syncTimeInputs();
}

// Permalinks, incidents and annotations (incidents.js), loaded once, on first use.
function loadSharing() {
  session.sharing ??= import("./incidents.js").then((sharing) => {
    sharing.bindIncidentControls();
    return sharing;
  });
  return session.sharing;
}

// A control whose behaviour is a module of its own: the first use loads it (``load``), whose handler,
// bound as it loads, then answers that use and every later one.
function onFirstUse(button, load) {
  const first = async (event) => {
    event.stopImmediatePropagation();
    button.removeEventListener("click", first);
    try {
      await load();
    } catch (error) {
      button.addEventListener("click", first);
      setStatus(`error: ${error.message}`, true);
      return;
    }
    button.click();
  };
  button.addEventListener("click", first);
}

function stylesheet(href) {
  return new Promise((resolve, reject) => {
    const link = Object.assign(document.createElement("link"), { rel: "stylesheet", href });
    link.addEventListener("load", resolve);
    link.addEventListener("error", () => reject(new Error(`${href} could not be loaded`)));
    document.head.appendChild(link);
  });
}

// The first view's lanes are asked for at once, beside the catalogue and before Plotly.js is evaluated
// (it holds the page's one thread for about half a second): the page names the default lanes when
// the URL names none, and first_request.js has sent that request before this module could run. Only a link naming series by id (resolved by the catalogue), the rule "plus my
// related lanes" (the viewer's lanes in the catalogue) or a URL whose lanes are all refused waits for
// the catalogue first. The first drawing waits for both.
async function main() {
  bindPage();
  const known = knownFirstLanes(WARROOM.default_lanes); // null: the catalogue names the first lanes
  if (known) {
    state.lanes = known;
    firstView();
  }
  const legacy = state.legacySeries.length ? `&series=${state.legacySeries.join(",")}` : "";
  const catalogueUrl = `${API}/catalogue?${windowParams()}${legacy}`;
  // asked once the first lanes have answered when they left first (refresh), else at once
  session.catalogueAnswer = (session.firstLanesSettled || Promise.resolve()).then(() => getJson(catalogueUrl));
  session.catalogueAnswer.catch(() => {}); // said below and by the first drawing
  loadPlotly().catch(() => {}); // a failure is said by the first drawing
  try {
    session.catalogue = await session.catalogueAnswer;
  } catch (error) {
    setStatus(`error: ${error.message}`, true);
    return;
  }
  if (known) return;
  if (!state.lanes.length && session.catalogue.from_series && session.catalogue.from_series.length) state.lanes = session.catalogue.from_series;
  if (!state.lanes.length) state.lanes = session.catalogue.defaults;
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
  if (state.incident) loadSharing().then((sharing) => sharing.showIncident(state.incident), () => {});
}

// What the browser tests (and a curious engineer in the console) read: the view state and its data.
window.jointline = { state, view };
main();
