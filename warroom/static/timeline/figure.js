// Builds the one Plotly figure of the war room: every lane is a subplot on the same x axis, so zoom,
// pan and hover stay aligned by construction. Lane titles, readouts and the crosshair are DOM elements
// laid over the figure (lane_titles.js, readout.js); this module computes where each lane sits in pixels.
import { binaryLane, cellValue, escapeHtml, formatTime, formatValue, hexOrRgba, hexToRgba, labelText, laneUnit, shade, tickFormat, truncate } from "./format.js";

export const MARGIN = { l: 62, r: 64, t: 6, b: 34 };
export const TITLE_GAP = 17;
const STRIP_HEIGHT = 18;
const SEVERITY_COLOURS = { info: null, warning: "#d97706", error: "#dc2626" };
export const SEVERITY_ROWS = ["info", "warning", "error"];
const SEVERITY_CLASS = { debug: "info", info: "info", notice: "info", warning: "warning", error: "error", critical: "error" };
const CAPACITY_COLOUR = "#374151";
const HIGHLIGHT_COLOUR = "#111827";
const HIT_COLOUR = "#f59e0b";

export function laneHeight(lane) {
  if (lane.status !== "ok") return 22;
  switch (lane.kind) {
    case "spans": return clamp((lane.rows || []).length * 1.9, 48, 130);
    case "heatmap": return clamp((lane.rows || []).length * 2.1, 60, 140);
    case "logs": return lane.mode === "list" ? 36 : 14 * Math.max(1, ["info", "warning", "error"].filter((n) => n === "info" || lane.counts[n].some((c) => c > 0)).length);
    default: return 54;
  }
}

function clamp(v, lo, hi) {
  return Math.max(lo, Math.min(hi, Math.round(v)));
}

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
    const added = LANE_BUILDERS[lane.kind](lane, axis.ref, colour, unit, base.domain);
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

function seriesName(series) {
  const labels = labelText(series.labels);
  return escapeHtml(labels ? `${series.metric}{${labels}}` : series.metric);
}

function lineLane(lane, yaxis, colour, unit) {
  const traces = lane.lines.map((line, i) => ({
    type: "scatter",
    mode: "lines",
    x: line.t,
    y: line.y,
    yaxis,
    line: { color: i === 0 ? colour : shade(colour, (i % 2 ? 0.35 : -0.3) * Math.ceil(i / 2) / 2), width: 1.2 },
    hovertemplate: `${seriesName(line.series)}<br>%{x|%H:%M:%S}: %{y:.4s}${escapeHtml(unit)}<extra></extra>`,
  }));
  return { traces, axis: capacityRange(lane, Math.max(0, ...lane.lines.flatMap((l) => l.y.filter((v) => v !== null)))),
    annotations: capacityTraces(lane, yaxis, traces, unit) };
}

function bandLane(lane, yaxis, colour, unit) {
  const u = escapeHtml(unit);
  const traces = [
    { type: "scatter", mode: "lines", x: lane.t, y: lane.hi, yaxis, line: { width: 0, color: colour }, name: "max",
      hovertemplate: `max %{y:.4s}${u}<extra></extra>`, connectgaps: false },
    { type: "scatter", mode: "lines", x: lane.t, y: lane.lo, yaxis, line: { width: 0, color: colour }, fill: "tonexty",
      fillcolor: hexToRgba(colour, 0.22), name: "min", hovertemplate: `min %{y:.4s}${u}<extra></extra>`, connectgaps: false },
    { type: "scatter", mode: "lines", x: lane.t, y: lane.mid, yaxis, line: { width: 1.4, color: colour }, name: "median",
      hovertemplate: `median %{y:.4s}${u}<extra></extra>`, connectgaps: false },
  ];
  for (const node of lane.nodes || []) {
    traces.push({ type: "scatter", mode: "lines", x: lane.t, y: node.y, yaxis,
      line: { width: 0.6, color: hexToRgba(colour, 0.35) }, hovertemplate: `${escapeHtml(node.label)} %{y:.4s}${u}<extra></extra>` });
  }
  const top = Math.max(0, ...lane.hi.filter((v) => v !== null));
  return { traces, axis: capacityRange(lane, top), annotations: capacityTraces(lane, yaxis, traces, unit) };
}

function sumLane(lane, yaxis, colour, unit) {
  const u = escapeHtml(unit);
  const traces = [];
  if (lane.hi) {
    traces.push({ type: "scatter", mode: "lines", x: lane.t, y: lane.hi, yaxis, line: { width: 0 }, hoverinfo: "skip" });
    traces.push({ type: "scatter", mode: "lines", x: lane.t, y: lane.lo, yaxis, line: { width: 0 }, fill: "tonexty",
      fillcolor: hexToRgba(colour, 0.25), hoverinfo: "skip" });
  }
  traces.push({ type: "scatter", mode: "lines", x: lane.t, y: lane.sum, yaxis, line: { width: 1.5, color: colour },
    fill: lane.hi ? "none" : "tozeroy", fillcolor: hexToRgba(colour, 0.12),
    hovertemplate: `%{x|%H:%M:%S} %{y:.4s}${u}<extra></extra>` });
  const values = (lane.hi || lane.sum).filter((v) => v !== null);
  return { traces, axis: capacityRange(lane, Math.max(0, ...values)), annotations: capacityTraces(lane, yaxis, traces, unit) };
}

function capacityRange(lane, top) {
  const capacity = lane.capacity && lane.capacity.y.length ? Math.max(...lane.capacity.y) : 0;
  const high = Math.max(top, capacity) || 1;
  return { range: [0, high * 1.12] };
}

// The capacity is a dashed step line with its value written at the right end.
function capacityTraces(lane, yaxis, traces, unit) {
  const capacity = lane.capacity;
  if (!capacity || !capacity.t.length) return [];
  traces.push({ type: "scatter", mode: "lines", x: capacity.t, y: capacity.y, yaxis,
    line: { color: CAPACITY_COLOUR, width: 1.3, dash: "dash", shape: "hv" },
    hovertemplate: `capacity %{y:.4s}${escapeHtml(unit)}<extra></extra>` });
  const last = capacity.y[capacity.y.length - 1];
  return [{ xref: "paper", x: 1, xanchor: "right", yref: yaxis, y: last, yanchor: "top", yshift: -1, showarrow: false,
    text: `capacity ${escapeHtml(formatValue(last, unit, binaryLane(lane)))}`, font: { size: 9, color: CAPACITY_COLOUR },
    bgcolor: "rgba(255,255,255,0.8)" }];
}

function heatmapLane(lane, yaxis, colour, unit, domain) {
  const cells = lane.z.map((row) => row.map((count) => cellValue(lane, count)));
  const values = cells.flat().filter((v) => v !== null).sort((a, b) => a - b);
  const zmax = values.length ? values[Math.floor(values.length * 0.995)] || values[values.length - 1] : 0;
  const rows = lane.rows.map((r) => escapeHtml(r));
  const step = Math.max(1, Math.ceil(rows.length / 5));
  const tickvals = rows.filter((_, i) => i % step === 0);
  const binary = binaryLane(lane);
  lane._zmax = zmax;
  // Values are shown in one prefix of the lane's convention (GiB/s for a binary lane), so the hover
  // and the colour bar read alike without a label per cell.
  const [factor, prefixed] = scaleFor(zmax, unit, binary);
  const top = zmax || 1;
  const ticks = [0, top / 2, top];
  return {
    traces: [{
      type: "heatmap", x: lane.t, y: rows, z: cells.map((row) => row.map((v) => (v === null ? null : v / factor))), yaxis,
      zmin: 0, zmax: top / factor, showscale: values.length > 0,
      colorscale: [[0, "#f8fafc"], [0.15, shade(colour, 0.7)], [0.6, colour], [1, shade(colour, -0.55)]],
      colorbar: { thickness: 8, len: Math.max(0.05, domain[1] - domain[0]), lenmode: "fraction", y: (domain[0] + domain[1]) / 2,
        yanchor: "middle", x: 1.005, xanchor: "left", xpad: 2, ypad: 0, outlinewidth: 0, tickfont: { size: 9, color: "#475467" },
        tickvals: ticks.map((v) => v / factor), ticktext: ticks.map((v) => escapeHtml(formatValue(v, unit, binary))) },
      hovertemplate: `%{y} %{x|%H:%M:%S}<br>%{z:.3~f} ${escapeHtml(prefixed)}<extra></extra>`, hoverongaps: false,
      xgap: 0, ygap: 0,
    }],
    axis: { type: "category", autorange: "reversed", tickvals, ticksuffix: "", tickformat: "", showgrid: false, nticks: undefined },
  };
}

// The divisor and the prefixed unit that show ``top`` in one to four digits (GiB/s, MB/s, k ops/s).
function scaleFor(top, unit, binary) {
  const steps = binary ? [[2 ** 40, "Ti"], [2 ** 30, "Gi"], [2 ** 20, "Mi"], [2 ** 10, "Ki"]] : [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (const [size, prefix] of steps) if (Math.abs(top) >= size) return [size, `${prefix}${unit}`];
  return [1, unit];
}

function spansLane(lane, yaxis, colour) {
  const rows = lane.rows.map((r) => escapeHtml(r));
  const seg = lane.segments;
  const traces = [{
    type: "bar", orientation: "h", yaxis, base: seg.map((s) => s.start), x: seg.map((s) => Math.max(s.end - s.start, 1)),
    y: seg.map((s) => rows[s.row]), width: 0.86,
    marker: { color: seg.map((s) => (s.event && ["error", "critical"].includes(s.event.severity) ? "#dc2626" : colour)), line: { width: 0 } },
    hovertext: seg.map((s) => spanHover(s, lane.rows[s.row])), hovertemplate: "%{hovertext}<extra></extra>",
  }];
  const marks = lane.marks.filter((m) => m.row !== null);
  if (marks.length) {
    traces.push({
      type: "scatter", mode: "markers", yaxis, x: marks.map((m) => m.event.t), y: marks.map((m) => rows[m.row]),
      marker: { symbol: "x-thin", size: 6, line: { width: 1.2, color: marks.map((m) => SEVERITY_COLOURS[SEVERITY_CLASS[m.event.severity]] || "rgba(255,255,255,0.7)") } },
      hovertext: marks.map((m) => eventHover(m.event)), hovertemplate: "%{hovertext}<extra></extra>",
    });
  }
  const step = Math.max(1, Math.ceil(rows.length / 5));
  return {
    traces,
    axis: { type: "category", autorange: "reversed", categoryorder: "array", categoryarray: rows,
      tickvals: rows.filter((_, i) => i % step === 0), showgrid: false, ticksuffix: "", tickformat: "" },
  };
}

function spanHover(segment, row) {
  const when = `${formatTime(segment.start, false)} – ${formatTime(segment.end, false)}`;
  if (segment.event) {
    const e = segment.event;
    return `<b>${escapeHtml(row)}</b> ${escapeHtml(e.name)} (${escapeHtml(e.attributes?.outcome || e.severity)})<br>${escapeHtml(truncate(e.message, 160))}<br>${when}`;
  }
  return `<b>${escapeHtml(row)}</b> ${segment.count} spans<br>${when}`;
}

export function eventHover(e) {
  const where = labelText(e.resource);
  return `<b>${escapeHtml(e.org)} · ${escapeHtml(e.signal)} · ${escapeHtml(e.name)}</b> (${escapeHtml(e.severity)})<br>` +
    `${escapeHtml(formatTime(e.t))}${clockNote(e)}${where ? ` · ${escapeHtml(where)}` : ""}<br>${escapeHtml(truncate(e.message, 300))}`;
}

// " (clock corrected −2.70 s)" when a correction moved an event's time, else "".
export function clockNote(e) {
  if (!e.clock_shift_us) return "";
  const s = e.clock_shift_us / 1e6;
  return ` (clock corrected ${s > 0 ? "+" : "−"}${Math.abs(s).toFixed(Math.abs(s) < 10 ? 2 : 1)} s)`;
}

// Is there nothing to draw in a lane for its window?
export function laneEmpty(lane) {
  if (lane.status !== "ok") return true;
  const none = (values) => !(values || []).some((v) => v !== null && v !== undefined);
  switch (lane.kind) {
    case "line":
    case "rate": return !lane.lines.some((line) => line.t.length);
    case "band": return none(lane.mid);
    case "sum": return none(lane.sum);
    case "heatmap": return !lane.z.some((row) => !none(row));
    case "logs": return !lane.total;
    case "spans": return !lane.segments.length && !lane.marks.length;
    default: return false;
  }
}

// What is written beside a lane's title, after its name: notes of the server, the level it is shared
// at, and "no data" for an empty lane. The war room and the static report write the same.
export function laneNotes(lane) {
  if (lane.placeholder) return [];
  const notes = [lane.note, lane.capacity && lane.capacity.note].filter(Boolean);
  const levels = (lane.group && lane.group.levels) || [];
  if (levels.includes("aggregate")) notes.push(lane.kind === "band" ? "shared as a fleet aggregate (no per-node lines)" : "shared as a fleet aggregate");
  else if (levels.includes("redacted")) notes.push(["logs", "spans"].includes(lane.kind) ? "shared without message bodies" : "redacted");
  if (lane.status === "ok" && laneEmpty(lane)) notes.push(lane.kind === "logs" ? "no lines in this window" : "no data in this window");
  else if (lane.kind === "logs" && lane.mode === "list") notes.push(`${lane.events.length} lines, hover for the message`);
  return notes;
}

function logsLane(lane, yaxis, colour) {
  if (lane.mode === "list") {
    const byClass = (e) => SEVERITY_CLASS[e.severity] || "info";
    return {
      traces: [{
        type: "scatter", mode: "markers", yaxis, x: lane.events.map((e) => e.t),
        y: lane.events.map((e) => SEVERITY_ROWS.indexOf(byClass(e))),
        marker: { size: 6, symbol: "line-ns-open", line: { width: 2, color: lane.events.map((e) => SEVERITY_COLOURS[byClass(e)] || colour) } },
        hovertext: lane.events.map(eventHover), hovertemplate: "%{hovertext}<extra></extra>",
        customdata: lane.events.map((e) => e.id),
      }],
      axis: { range: [-0.7, 2.7], tickvals: [0, 1, 2], ticktext: ["info", "warn", "error"], showgrid: false, ticksuffix: "", tickformat: "" },
    };
  }
  // Dense: a strip per severity class, colour by log(count) so a burst does not flatten the rest. One
  // heatmap whose rows are the classes: each class owns a third of the colour scale (Plotly cannot
  // stack single-row heatmaps on one axis).
  const classes = SEVERITY_ROWS.filter((name) => name === "info" || lane.counts[name].some((n) => n > 0));
  const top = Math.log1p(Math.max(1, ...classes.flatMap((name) => lane.counts[name])));
  const k = SEVERITY_ROWS.length;
  const colorscale = [];
  SEVERITY_ROWS.forEach((name, i) => {
    const strong = SEVERITY_COLOURS[name] || shade(colour, -0.25);
    colorscale.push([i / k, hexOrRgba(strong, 0.16)], [(i + 1) / k - 1e-6, strong]);
  });
  const z = classes.map((name) => {
    const i = SEVERITY_ROWS.indexOf(name);
    return lane.counts[name].map((n) => (n > 0 ? i + Math.min(0.999, 0.15 + (0.85 * Math.log1p(n)) / top) : null));
  });
  const label = (name) => (name === "warning" ? "warn" : name);
  return {
    traces: [{
      type: "heatmap", x: lane.t, y: classes.map(label), z, text: classes.map((name) => lane.counts[name]),
      customdata: classes.map((name) => lane.t.map(() => name)), yaxis, zmin: 0, zmax: k, showscale: false, colorscale,
      hovertemplate: `%{x|%H:%M:%S} %{text} %{customdata} lines / ${Math.round(lane.step_ms / 1000)} s<extra></extra>`,
      hoverongaps: false, ygap: 1,
    }],
    axis: { type: "category", showgrid: false, ticksuffix: "", tickformat: "" },
  };
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

const LANE_BUILDERS = {
  line: lineLane,
  rate: lineLane,
  band: bandLane,
  sum: sumLane,
  heatmap: heatmapLane,
  spans: spansLane,
  logs: logsLane,
};
