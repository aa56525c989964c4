// The war room as host of its analysis panels (analysis/warroom.js: "What changed", the statistics of
// a stretch; timeline.js binds them to this host): what the panels may do to the view, what the figure
// draws of them (the selected stretch on its lane, each onset on its own), and the drag across a lane
// that selects a stretch. The panels' modules are loaded when first used (analysisOnDemand), not on
// the first view's path.
import { getJson } from "./api.js";
import { escapeHtml, hexOrRgba, MARGIN } from "./format.js";
import { addLane, hasLane, showLane } from "./lane_titles.js";
import { $, setStatus } from "./page.js";
import { canonicalSpec, SERIES_KINDS } from "./spec.js";
import { ANALYSIS_PARAMS, cycle, session, state, view, writeUrl } from "./state.js";
import { plotArea, timeAt } from "./zoom.js";

const MIN_DRAG_PX = 4;

// What the panels may do to the view and read of it (analysis/warroom.js names each).
export function analysisHost() {
  return {
    getJson,
    addLane,
    hasLane,
    showLane,
    viewWindow: () => view.window,
    aligned: () => state.align,
    changed: () => writeUrl(),
    redraw: () => {
      if (view.window) cycle.render();
    },
  };
}

// The panels as the war room holds them (session.analysis), their modules loaded on first use: the
// "What changed" button, a stretch dragged across a lane, or a URL that opens a panel or names a
// stretch (loaded when the first view is drawn). Until then it keeps the panels' URL parameters as
// the URL gave them, so links and the URL carry them unchanged. ``load`` imports analysis/warroom.js.
export function analysisOnDemand(load) {
  const host = analysisHost();
  const held = { panels: null, loading: null, params: [] };
  const ready = () => {
    held.loading ??= load().then(({ analysisPanels }) => {
      held.panels = analysisPanels(host);
      held.panels.readParams(new URLSearchParams(held.params));
      return held.panels;
    });
    return held.loading;
  };
  const toggle = $("toggle-changes");
  toggle.addEventListener("click", async (event) => {
    if (held.panels) return; // the panels' own handler, bound as they loaded, answers
    event.stopImmediatePropagation();
    try {
      (await ready()).viewDrawn(view.drawn);
    } catch (error) {
      setStatus(`error: ${error.message}`, true);
      return;
    }
    toggle.click();
  });
  return {
    readParams(p) {
      held.params = [...p].filter(([key]) => ANALYSIS_PARAMS.includes(key));
      if (held.panels) held.panels.readParams(p);
    },
    writeParams(p) {
      if (held.panels) return held.panels.writeParams(p);
      for (const key of ANALYSIS_PARAMS) p.delete(key);
      for (const [key, value] of held.params) p.append(key, value);
    },
    linkState: () => (held.panels ? held.panels.linkState() : Object.fromEntries(held.params)),
    viewDrawn(lanes) {
      if (held.panels) held.panels.viewDrawn(lanes);
      else if (held.params.length) ready().then((panels) => panels.viewDrawn(lanes), (error) => setStatus(`error: ${error.message}`, true));
    },
    figureMarks: () => (held.panels ? held.panels.figureMarks() : { stretch: null, onsets: [] }),
    selectStretch(stretch) {
      ready().then((panels) => panels.selectStretch(stretch), (error) => setStatus(`error: ${error.message}`, true));
    },
    clearStretch: () => held.panels && held.panels.clearStretch(),
    close: () => held.panels && held.panels.close(),
    isOpen: () => Boolean(held.panels && held.panels.isOpen()),
    seriesKind: (kind) => SERIES_KINDS.includes(kind),
  };
}

function laneOfSpec(spec) {
  return spec ? view.drawn.find((lane) => !lane.placeholder && (canonicalSpec(lane.spec) || lane.spec) === spec) : null;
}

// What the figure draws of the analysis (figure.js calls it with the rows it laid out): the selected
// stretch shaded on its lane, and each onset of "which moved first" as a tick on its lane with its
// uncertainty shaded around it and its rank beside it.
export function analysisOverlay() {
  const marks = session.analysis.figureMarks();
  const stretchLane = marks.stretch && laneOfSpec(marks.stretch.spec);
  const onsets = marks.onsets.map((o) => ({ ...o, lane: laneOfSpec(o.spec) })).filter((o) => o.lane);
  return (rows, domainOf, shapes, annotations) => {
    const rowOf = (lane) => rows.find((row) => row.lane && row.lane === lane);
    const stretchRow = stretchLane && rowOf(stretchLane);
    if (stretchRow) {
      const [y0, y1] = domainOf(stretchRow);
      shapes.push({ type: "rect", xref: "x", yref: "paper", x0: marks.stretch.from_ms, x1: marks.stretch.to_ms, y0, y1,
        fillcolor: "rgba(29,78,216,0.12)", line: { color: "rgba(29,78,216,0.85)", width: 1 }, layer: "above" });
    }
    for (const onset of onsets) {
      const row = rowOf(onset.lane);
      if (!row) continue;
      const [y0, y1] = domainOf(row);
      const colour = (onset.lane.title && onset.lane.title.colour) || "#475467";
      shapes.push({ type: "rect", xref: "x", yref: "paper", x0: onset.onset_ms - onset.uncertainty_ms, x1: onset.onset_ms + onset.uncertainty_ms,
        y0, y1, fillcolor: hexOrRgba(colour, 0.1), line: { width: 0 }, layer: "below" });
      shapes.push({ type: "line", xref: "x", yref: "paper", x0: onset.onset_ms, x1: onset.onset_ms, y0, y1,
        line: { color: colour, width: 1.6 }, layer: "above" });
      annotations.push({ xref: "x", x: onset.onset_ms, xanchor: "left", xshift: 2, yref: "paper", y: y1, yanchor: "top", showarrow: false,
        text: `onset #${Number(onset.rank)}`, font: { size: 9, color: "#101828" }, bgcolor: "rgba(255,255,255,0.85)",
        hovertext: escapeHtml(`${onset.org} · ${onset.title}: onset ± ${Math.round(onset.uncertainty_ms / 1000)} s`) });
    }
  };
}

// ------------------------------------------------------------------ selecting a stretch of a lane

// Drag across a lane to select a stretch of it, in select mode (the Select button) or with Shift held;
// any other drag zooms, as before. The drag is taken before Plotly sees it.
function laneRowAt(clientY) {
  if (!view.geometry) return null;
  const y = clientY - $("figure").getBoundingClientRect().top - MARGIN.t;
  return view.geometry.rows.find((row) => row.lane && y >= row.top && y <= row.top + row.height) || null;
}

export function bindSelecting() {
  $("select-mode").addEventListener("click", () => setSelecting(!state.selecting));
  $("figure").addEventListener("mousedown", onDragStart, true);
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
  if (lane.placeholder || lane.status !== "ok" || !session.analysis.seriesKind(lane.kind)) {
    setStatus("statistics are of series lanes: drag across a line, rate, band, sum or heatmap lane", true);
    return;
  }
  session.drag = { row, startX: event.clientX, startMs: t, endX: event.clientX, endMs: t };
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
  const drag = session.drag;
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
  if (!session.drag) return;
  event.preventDefault();
  event.stopPropagation();
  const { x, t } = clampedTime(event.clientX);
  session.drag.endX = x;
  session.drag.endMs = t;
  moveBand(stretchBand());
}

function onDragEnd(event) {
  document.removeEventListener("mousemove", onDragMove, true);
  document.removeEventListener("mouseup", onDragEnd, true);
  if (!session.drag) return;
  event.preventDefault();
  event.stopPropagation();
  const { row, startX, startMs, endX, endMs } = session.drag;
  session.drag = null;
  stretchBand().hidden = true;
  if (Math.abs(endX - startX) < MIN_DRAG_PX || endMs === startMs) return;
  session.analysis.selectStretch({ spec: row.lane.spec, lane: row.lane, from_ms: Math.min(startMs, endMs), to_ms: Math.max(startMs, endMs) });
}

function setSelecting(on) {
  state.selecting = on;
  $("select-mode").setAttribute("aria-pressed", String(on));
  $("select-mode").classList.toggle("on", on);
  $("figure").classList.toggle("wr-selecting", on);
}
