// Builds the one Plotly figure of the war room: every lane is a subplot on the same x axis, so zoom,
// pan and hover stay aligned by construction. Lane titles, readouts and the crosshair are DOM elements
// laid over the figure (lane_titles.js, readout.js); this module computes where each lane sits in pixels.
// How each lane kind is drawn is lane_kinds.js's table.
import { escapeHtml, eventHover, hexToRgba, laneUnit, MARGIN, tickFormat } from "./format.js";
import { drawLane, laneHeight } from "./lane_kinds.js";

export const TITLE_GAP = 17;
const STRIP_HEIGHT = 18;
const HIGHLIGHT_COLOUR = "#111827";
const HIT_COLOUR = "#f59e0b";

// Pixel geometry: strips (marks, search hits) on top, then each lane below its title gap.
export function layoutGeometry(lanes, { strips }) {
  const rows = [];
  let y = 0;
  for (const strip of strips) {
    const height = strip === "marks" ? STRIP_HEIGHT + NOTE_ROW_PX * (strips.noteRows || 0) : STRIP_HEIGHT;
    rows.push({ strip, top: y, height });
    y += height + 4;
  }
  lanes.forEach((lane, position) => {
    y += TITLE_GAP;
    const height = laneHeight(lane);
    const index = lane._index === undefined ? position : lane._index;
    rows.push({ lane, index, titleTop: y - TITLE_GAP, top: y, height });
    y += height + 4;
  });
  return { rows, plotHeight: Math.max(y, 60) };
}

export function buildFigure(view) {
  const { lanes, marks, hits, highlight, window: win, colours } = view;
  const strips = [];
  strips.notes = marks.some((m) => m.annotation);
  const placement = placeMarks(marks, win, view.width || 1200);
  strips.noteRows = placement.noteRows;
  if (marks.length) strips.push("marks");
  if (hits && hits.length) strips.push("hits");
  const geometry = layoutGeometry(lanes, { strips });
  const P = geometry.plotHeight;
  const domainOf = (row) => [Math.max(0, 1 - (row.top + row.height) / P), Math.min(1, 1 - row.top / P)];
  const traces = [];
  const shapes = [];
  const annotations = [];
  const layout = {
    height: P + MARGIN.t + MARGIN.b,
    margin: MARGIN,
    showlegend: false,
    hovermode: "closest",
    hoverlabel: { namelength: -1, font: { size: 11 }, align: "left" },
    dragmode: "zoom",
    plot_bgcolor: "#ffffff",
    paper_bgcolor: "#ffffff",
    font: { family: "system-ui, -apple-system, 'Segoe UI', sans-serif", size: 10, color: "#344054" },
    uirevision: "warroom",
    xaxis: {
      type: "date",
      range: [win.from_ms, win.to_ms],
      showgrid: true,
      gridcolor: "#eef0f3",
      tickfont: { size: 11, color: "#1d2330" },
      tickformatstops: [
        { dtickrange: [null, 60000], value: "%H:%M:%S" },
        { dtickrange: [60000, 86400000], value: "%H:%M\n%b %d" },
        { dtickrange: [86400000, null], value: "%b %d" },
      ],
      showspikes: false,
      linecolor: "#98a2b3",
      ticks: "outside",
      ticklen: 4,
      // The time axis sits at the bottom of the plot area, whatever lane is last (a lane without data
      // has no subplot of its own, and an axis anchored to it would jump to the top).
      anchor: "free",
      position: 0,
    },
    shapes,
    annotations,
  };
  let axisNumber = 0;
  const nextAxis = () => {
    axisNumber += 1;
    return axisNumber === 1 ? { ref: "y", key: "yaxis" } : { ref: `y${axisNumber}`, key: `yaxis${axisNumber}` };
  };
  for (const row of geometry.rows) {
    const axis = nextAxis();
    row.axis = axis.ref;
    const base = { domain: domainOf(row), fixedrange: true, zeroline: false, showgrid: true, gridcolor: "#f2f4f7",
      tickfont: { size: 9, color: "#667085" }, nticks: 3, automargin: false, linecolor: "#e4e7ec", showline: true };
    if (row.strip === "marks") {
      layout[axis.key] = { ...base, range: [0, placement.noteRows + 1], showticklabels: false, showgrid: false, showline: false };
      marksTraces(placement, axis.ref, colours, traces, annotations);
      continue;
    }
    if (row.strip === "hits") {
      layout[axis.key] = { ...base, range: [-1, 1], showticklabels: false, showgrid: false, showline: false };
      hitTraces(hits, axis.ref, traces);
      continue;
    }
    const lane = row.lane;
    if (lane.status !== "ok") {
      layout[axis.key] = { ...base, showticklabels: false, showgrid: false, range: [0, 1] };
      // a lane with nothing to draw keeps its place: a grey band (hatched-looking for placeholders)
      shapes.push({ type: "rect", xref: "paper", yref: "paper", x0: 0, x1: 1, y0: base.domain[0], y1: base.domain[1],
        fillcolor: lane.placeholder ? "rgba(152,162,179,0.16)" : "rgba(242,244,247,0.9)", line: { width: 0 }, layer: "below" });
      continue;
    }
    const colour = lane.title.colour || "#4c78a8";
    const unit = laneUnit(lane.title.unit, lane.fn);
    const added = drawLane(lane, axis.ref, colour, unit, base.domain);
    traces.push(...added.traces);
    layout[axis.key] = { ...base, ...tickFormat(unit), ...(added.axis || {}) };
    if (added.annotations) annotations.push(...added.annotations);
  }
  for (const mark of marks) {
    const colour = colours[mark.org] || mark.colour || "#667085";
    shapes.push(mark.annotation ? vline(mark.t, hexToRgba(colour, 0.9), 1.3, "dash") : vline(mark.t, hexToRgba(colour, 0.5), 1, "dot"));
    if (mark.annotation && mark.end_t) {
      shapes.push({ type: "rect", xref: "x", yref: "paper", x0: mark.t, x1: mark.end_t, y0: 0, y1: 1,
        fillcolor: hexToRgba(colour, 0.07), line: { width: 0 }, layer: "below" });
    }
  }
  if (hits && hits.length && hits.length <= 80) {
    for (const hit of hits) shapes.push(vline(hit.t, hexToRgba(HIT_COLOUR, 0.45), 1, "solid"));
  }
  // An axis no trace draws a point on may have no plot area of its own: Plotly drew its line at NaN
  // (a console error on drawings with a lane that answered nothing, or an empty line); no line then.
  const drawnOn = new Set(traces.filter((t) => !Array.isArray(t.x) || t.x.length > 0).map((t) => t.yaxis || "y"));
  for (const row of geometry.rows) {
    const key = row.axis === "y" ? "yaxis" : `yaxis${row.axis.slice(1)}`;
    if (!drawnOn.has(row.axis) && layout[key]) layout[key].showline = false;
  }
  if (view.overlay) view.overlay(geometry.rows, domainOf, shapes, annotations); // the war room's analysis
  if (highlight) {
    shapes.push(vline(highlight.t, HIGHLIGHT_COLOUR, 1.6, "solid"));
    if (highlight.end_t) {
      shapes.push({ type: "rect", xref: "x", yref: "paper", x0: highlight.t, x1: highlight.end_t, y0: 0, y1: 1,
        fillcolor: "rgba(17,24,39,0.06)", line: { width: 0 }, layer: "below" });
    }
  }
  return { traces, layout, geometry };
}

function vline(x, colour, width, dash) {
  return { type: "line", xref: "x", yref: "paper", x0: x, x1: x, y0: 0, y1: 1, line: { color: colour, width, dash }, layer: "above" };
}


// The top strip: people's annotations (numbered, one row each until they collide, at most MAX_NOTE_ROWS
// rows) and notable events (the bottom row). No label is ever dropped: a label that would run into the
// next one on its row is abbreviated ("…"), keeping at least its number, and its full text is in its
// hover and in the side list, which numbers the notes the same way.
const MAX_NOTE_ROWS = 4;
const NOTE_ROW_PX = 13;
const NOTE_CHAR_PX = 6.2;
const EVENT_CHAR_PX = 5.2;

export function noteNumbers(marks) {
  const numbers = new Map();
  [...marks].filter((m) => m.annotation).sort((a, b) => a.t - b.t).forEach((m, i) => numbers.set(m.id, i + 1));
  return numbers;
}

export function placeMarks(marks, win, width) {
  const pxPerMs = width / Math.max(1, win.to_ms - win.from_ms);
  const numbers = noteNumbers(marks);
  const sorted = [...marks].sort((a, b) => a.t - b.t);
  const notes = sorted.filter((m) => m.annotation);
  const events = sorted.filter((m) => !m.annotation);
  const noteRows = notes.length ? Math.min(MAX_NOTE_ROWS, notes.length) : 0;
  const rows = Array.from({ length: noteRows }, () => []);
  const placed = [];
  const px = (m) => (m.t - win.from_ms) * pxPerMs;
  for (const m of notes) {
    const x = px(m);
    const full = `${numbers.get(m.id)} ${markLabel(m)}`;
    const item = { m, x, full, text: full, charPx: NOTE_CHAR_PX };
    // the first row with room for the whole label, else the row whose last label ends first
    let row = rows.findIndex((r) => !r.length || r[r.length - 1].end <= x);
    if (row < 0) row = rows.reduce((best, r, i) => (r[r.length - 1].end < rows[best][rows[best].length - 1].end ? i : best), 0);
    const previous = rows[row][rows[row].length - 1];
    if (previous && previous.end > x) abbreviate(previous, x - previous.x);
    item.row = row;
    item.end = x + labelWidth(item.text, NOTE_CHAR_PX);
    rows[row].push(item);
    placed.push(item);
  }
  let last = null;
  for (const m of events) {
    const x = px(m);
    const full = markLabel(m);
    const item = { m, x, full, text: full, row: -1, charPx: EVENT_CHAR_PX };
    if (last && last.end > x) abbreviate(last, x - last.x);
    item.end = x + labelWidth(full, EVENT_CHAR_PX);
    placed.push(item);
    last = item;
  }
  for (const item of placed) {
    if (item.end > width + 50) abbreviate(item, width + 50 - item.x);
  }
  return { placed, noteRows, numbers };
}

function labelWidth(text, charPx) {
  return text.length * charPx + 14;
}

// Cut a label to fit ``room`` pixels; a note keeps at least its number.
function abbreviate(item, room) {
  const chars = Math.floor((room - 14) / item.charPx);
  const keep = item.m.annotation ? String(item.full.split(" ")[0]).length : 0;
  if (chars >= item.full.length) return;
  item.text = chars > keep + 1 ? `${item.full.slice(0, chars - 1)}…` : item.full.slice(0, Math.max(keep, 1));
  item.end = item.x + labelWidth(item.text, item.charPx);
}

function marksTraces(placement, yaxis, colours, traces, annotations) {
  const { placed, noteRows } = placement;
  const y = (item) => (item.row < 0 ? 0.5 : noteRows - item.row + 0.5);
  traces.push({
    type: "scatter", mode: "markers", yaxis, x: placed.map((p) => p.m.t), y: placed.map(y),
    marker: { symbol: placed.map((p) => (p.m.annotation ? "diamond" : "triangle-down")), size: placed.map((p) => (p.m.annotation ? 9 : 8)),
      color: placed.map((p) => colours[p.m.org] || p.m.colour || "#667085"), line: { width: 0 } },
    hovertext: placed.map((p) => eventHover(p.m)), hovertemplate: "%{hovertext}<extra></extra>", customdata: placed.map((p) => p.m.id),
  });
  for (const item of placed) {
    if (!item.text) continue;
    const note = item.m.annotation;
    annotations.push({ xref: "x", x: item.m.t, xanchor: "left", xshift: 6, yref: yaxis, y: y(item), yanchor: "middle", showarrow: false,
      text: note ? `<b>${escapeHtml(item.text)}</b>` : escapeHtml(item.text), font: { size: note ? 10.5 : 9, color: colours[item.m.org] || item.m.colour || "#667085" },
      bgcolor: "rgba(255,255,255,0.75)", hovertext: escapeHtml(item.full), captureevents: false });
  }
}

function markLabel(m) {
  if (m.annotation) return `${m.org}: ${m.name}`;
  return `${m.org}: ${String(m.name).replaceAll("_", " ")}`;
}

function hitTraces(hits, yaxis, traces) {
  traces.push({
    type: "scatter", mode: "markers", yaxis, x: hits.map((h) => h.t), y: hits.map(() => 0),
    marker: { symbol: "diamond", size: 8, color: HIT_COLOUR, line: { width: 1, color: "#92400e" } },
    hovertext: hits.map(eventHover), hovertemplate: "%{hovertext}<extra></extra>", customdata: hits.map((h) => h.id),
  });
}

