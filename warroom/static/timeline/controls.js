// The toolbar and the keys on the lanes: the window (presets, from/to, the live switch), zoom out, search,
// the clock panel, zoom and pan from the keyboard, a double-click anywhere on the lanes, and a new
// width of the figure.
import { MARGIN } from "./format.js";
import { $ } from "./page.js";
import { cycle, session, state, view } from "./state.js";
import { pan, plotWidth, syncTimeInputs, zoomIn, zoomOut, zoomOutOnDoubleClick } from "./zoom.js";

const PAN_FRACTION = 0.25;
const RESIZE_SETTLE_MS = 400;

function applyPreset(preset) {
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
  cycle.refresh();
}

// ``setLive(on)`` switches live mode (timeline.js: it belongs to the view's refresh cycle).
export function bindControls({ setLive }) {
  $("apply").addEventListener("click", () => {
    state.from = $("from").value.trim() || "now-3h";
    state.to = $("to").value.trim() || "now";
    setLive(state.to === "now" && state.live);
    cycle.refresh();
  });
  for (const button of document.querySelectorAll("[data-preset]")) {
    button.addEventListener("click", () => applyPreset(button.dataset.preset));
  }
  $("zoom-out").addEventListener("click", () => zoomOut(2));
  // Double-click zooms out anywhere on the lanes (Plotly's own double-click, which it hints at, is off).
  // While Plotly drags, a cover it lays over the page takes the mouse-up, so a double-click in a lane
  // reaches the document, not the figure: it counts where the pointer is.
  document.addEventListener("dblclick", (event) => {
    const r = $("figure").getBoundingClientRect();
    if (event.clientX >= r.left && event.clientX <= r.right && event.clientY >= r.top && event.clientY <= r.bottom) zoomOutOnDoubleClick();
  });
  for (const id of ["from", "to"]) {
    $(id).addEventListener("keydown", (event) => {
      if (event.key === "Enter") $("apply").click();
    });
  }
  $("figure").addEventListener("keydown", onFigureKey);
  $("clock-chip").addEventListener("click", () => {
    const panel = $("clock-panel");
    panel.hidden = !panel.hidden;
    $("clock-chip").setAttribute("aria-expanded", String(!panel.hidden));
  });
  $("align").addEventListener("change", () => {
    state.align = $("align").checked;
    cycle.refresh({ reason: state.align ? "clock corrections on" : "clock corrections off" });
  });
  $("live").addEventListener("change", () => {
    setLive($("live").checked);
    cycle.refresh({ reason: "live" });
  });
  $("search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.q = $("search").value.trim();
    cycle.refresh({ reason: "searching" });
  });
  $("search").addEventListener("search", () => {
    if (!$("search").value && state.q) {
      state.q = "";
      cycle.refresh();
    }
  });
  followWidth();
}

// A new width re-queries (the server downsamples to it); small changes only reflow.
function followWidth() {
  let resizeTimer = null;
  let queriedWidth = plotWidth();
  new ResizeObserver(() => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => {
      const width = plotWidth();
      if (session.plotReady && Math.abs(width - queriedWidth) > queriedWidth * 0.1) {
        queriedWidth = width;
        cycle.refresh({ reason: "resized" });
      } else if (session.plotReady && view.geometry) {
        // a new width only: the height stays the lanes' (a plain Plots.resize would autosize it too).
        // None when the plot is drawn at this size already: the box taking the first drawing's height
        // is a resize too, and drawing the same figure again holds the page's thread for 0.1-0.2 s.
        const plot = $("plot");
        const height = view.geometry.plotHeight + MARGIN.t + MARGIN.b;
        if (plot._fullLayout.width !== plot.clientWidth || plot._fullLayout.height !== height) {
          Plotly.relayout(plot, { width: plot.clientWidth, height });
        }
      }
    }, RESIZE_SETTLE_MS);
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
