// The view's window and the plot's pixels: zoom (a drag, the keys, the buttons, a double-click), pan,
// centre on an event, the window's inputs in the toolbar, the plot's width (the server downsamples
// each lane to it) and the time under a point of the plot.
import { MARGIN } from "./format.js";
import { $ } from "./page.js";
import { cycle, session, state, view } from "./state.js";

const ZOOM_DEBOUNCE_MS = 200;
const DOUBLE_CLICK_MS = 400;

// The plot's width in pixels: the figure's box less the margins of its axes.
export function plotWidth() {
  const width = $("figure").clientWidth || 1200;
  return Math.max(200, Math.min(4000, Math.round(width - MARGIN.l - MARGIN.r)));
}

// The window and the search as the toolbar shows them.
export function syncTimeInputs() {
  $("from").value = state.from;
  $("to").value = state.to;
  $("live").checked = state.live;
  $("search").value = state.q;
  for (const key of Object.keys(state.ev)) $(`ev-${key}`).value = state.ev[key];
}

function toMs(value) {
  if (typeof value === "number") return value;
  return Date.parse(`${String(value).replace(" ", "T")}${/Z|[+-]\d\d:?\d\d$/.test(value) ? "" : "Z"}`);
}

export function onRelayout(update) {
  if (session.ignoreRelayout) return;
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
  clearTimeout(session.zoomTimer);
  session.zoomTimer = setTimeout(() => cycle.refresh({ reason }), ZOOM_DEBOUNCE_MS);
}

export function zoomOut(factor = 2) {
  if (!view.window) return;
  const { from_ms: a, to_ms: b } = view.window;
  const centre = (a + b) / 2;
  const half = ((b - a) * factor) / 2;
  setWindow(centre - half, Math.min(centre + half, state.live ? Date.now() : Infinity), "zoom out");
}

// A double-click zooms out by two, once: Plotly's own double-click and the document's may both report it.
export function zoomOutOnDoubleClick() {
  if (performance.now() - session.lastDouble < DOUBLE_CLICK_MS) return;
  session.lastDouble = performance.now();
  zoomOut(2);
}

export function zoomIn(factor = 2) {
  if (!view.window) return;
  const { from_ms: a, to_ms: b } = view.window;
  const centre = view.crosshairMs && view.crosshairMs > a && view.crosshairMs < b ? view.crosshairMs : (a + b) / 2;
  const half = (b - a) / factor / 2;
  setWindow(centre - half, centre + half, "zoom in");
}

export function pan(fraction) {
  if (!view.window) return;
  const { from_ms: a, to_ms: b } = view.window;
  const shift = (b - a) * fraction;
  if (state.live) {
    state.live = false;
    $("live").checked = false;
  }
  setWindow(a + shift, b + shift, "panning");
}

export function centreOn(t) {
  const { from_ms: a, to_ms: b } = view.window;
  const half = (b - a) / 2;
  if (state.live) {
    state.live = false;
    $("live").checked = false;
  }
  setWindow(t - half, t + half, "centring");
}

export function plotArea() {
  const layout = $("plot")._fullLayout;
  if (!layout || !layout.xaxis) return null;
  return { left: layout.margin.l, width: layout.xaxis._length, range: layout.xaxis.range.map(toMs) };
}

// The time under the mouse, from the figure's x axis (null outside the plot area).
export function timeAt(clientX) {
  const area = plotArea();
  if (!area) return null;
  const x = clientX - $("figure").getBoundingClientRect().left - area.left;
  if (x < 0 || x > area.width) return null;
  return area.range[0] + (x / area.width) * (area.range[1] - area.range[0]);
}
