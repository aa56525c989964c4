// What each lane kind does, in one table keyed by the payload's ``kind`` (lane_payloads.schema.json):
// how tall its subplot is, how it is drawn, when it has nothing to draw, what its readout says at an
// instant, what is noted beside its title, and whether it is an event lane (no unit; not shared, it
// stands for its organisation's events). The figure, the readout, the titles, the placeholders, the
// picker, the notices and the static report ask this module; no other module compares a kind with a
// kind's name (tests/test_lane_kind_switches.py checks that).
import { binaryLane, cellValue, escapeHtml, eventHover, formatTime, formatValue, hexOrRgba, hexToRgba, labelText, laneUnit, shade, truncate, unitLabel } from "./format.js";

const SEVERITY_COLOURS = { info: null, warning: "#d97706", error: "#dc2626" };
const SEVERITY_ROWS = ["info", "warning", "error"];
const SEVERITY_CLASS = { debug: "info", info: "info", notice: "info", warning: "warning", error: "error", critical: "error" };
const CAPACITY_COLOUR = "#374151";
const UNAVAILABLE_HEIGHT = 22;

const none = (values) => !(values || []).some((v) => v !== null && v !== undefined);
const fixed = (height) => () => height;

function clamp(v, lo, hi) {
  return Math.max(lo, Math.min(hi, Math.round(v)));
}

// A kind's entry: draw(lane, yaxis, colour, unit, domain) gives its traces, the settings of its y axis
// and its annotations; height(lane) its subplot's pixels; empty(lane) whether it has nothing to draw;
// readout(lane, t, unit, binary) its value at instant t (ms). Optional: events (an event lane),
// nodeLines (per-node lines may be asked for), capacityByDefault (drawn against its group's capacity
// when added from the catalogue), aggregateNote and emptyNote (what its title says when it is shared
// as a fleet aggregate, or has nothing to draw), notes(lane) (more it says).
const LINE = { draw: lineLane, height: fixed(54), empty: (lane) => !lane.lines.some((line) => line.t.length), readout: lineReadout };
const KINDS = {
  line: LINE,
  rate: LINE,
  band: { draw: bandLane, height: fixed(54), empty: (lane) => none(lane.mid), readout: bandReadout, nodeLines: true,
    capacityByDefault: true, aggregateNote: "shared as a fleet aggregate (no per-node lines)" },
  sum: { draw: sumLane, height: fixed(54), empty: (lane) => none(lane.sum), readout: sumReadout, capacityByDefault: true },
  heatmap: { draw: heatmapLane, height: (lane) => clamp((lane.rows || []).length * 2.1, 60, 140),
    empty: (lane) => !lane.z.some((row) => !none(row)), readout: heatmapReadout },
  spans: { events: true, draw: spansLane, height: (lane) => clamp((lane.rows || []).length * 1.9, 48, 130),
    empty: (lane) => !lane.segments.length && !lane.marks.length, readout: spansReadout },
  logs: { events: true, draw: logsLane, height: logsHeight, empty: (lane) => !lane.total, readout: logsReadout,
    emptyNote: "no lines in this window", notes: (lane) => (lane.mode === "list" ? [`${lane.events.length} lines, hover for the message`] : []) },
};
// A lane of no kind drawn here (a placeholder): nothing to draw, nothing to read out.
const NO_KIND = { draw: () => ({ traces: [] }), height: fixed(UNAVAILABLE_HEIGHT), empty: () => true, readout: () => "" };

function kindOf(kind) {
  return Object.hasOwn(KINDS, kind) ? KINDS[kind] : NO_KIND;
}

// The event lane kinds, in the order the picker offers them.
export const EVENT_KINDS = Object.keys(KINDS).filter((kind) => KINDS[kind].events);

// Is ``kind`` (a lane's or a spec's) an event lane's?
export function isEventKind(kind) {
  return Boolean(kindOf(kind).events);
}

// Does a lane of ``kind`` offer per-node lines?
export function offersNodeLines(kind) {
  return Boolean(kindOf(kind).nodeLines);
}

// Is a lane of ``kind`` added from the catalogue drawn against its group's capacity?
export function capacityByDefault(kind) {
  return Boolean(kindOf(kind).capacityByDefault);
}

export function laneHeight(lane) {
  return lane.status === "ok" ? kindOf(lane.kind).height(lane) : UNAVAILABLE_HEIGHT;
}

// Is there nothing to draw in a lane for its window?
export function laneEmpty(lane) {
  return lane.status !== "ok" || kindOf(lane.kind).empty(lane);
}

// A drawn lane's traces, y-axis settings and annotations (``unit`` as its ticks and hover write it).
export function drawLane(lane, yaxis, colour, unit, domain) {
  return kindOf(lane.kind).draw(lane, yaxis, colour, unit, domain);
}

// The value a lane shows at instant ``t`` (ms), for the readout beside its title.
export function laneReadout(lane, t) {
  if (!lane || lane.status !== "ok") return "";
  return kindOf(lane.kind).readout(lane, t, laneUnit(lane.title.unit, lane.fn), binaryLane(lane));
}

// The unit chip of a lane's title: none for an event lane or a lane with nothing drawn.
export function titleUnit(lane) {
  return isEventKind(lane.kind) || lane.status !== "ok" ? "" : unitLabel(lane);
}

// What is written beside a lane's title, after its name: notes of the server, the level it is shared
// at, and "no data" for an empty lane. The war room and the static report write the same.
export function laneNotes(lane) {
  if (lane.placeholder) return [];
  const kind = kindOf(lane.kind);
  const notes = [lane.note, lane.capacity && lane.capacity.note].filter(Boolean);
  const levels = (lane.group && lane.group.levels) || [];
  if (levels.includes("aggregate")) notes.push(kind.aggregateNote || "shared as a fleet aggregate");
  else if (levels.includes("redacted")) notes.push(kind.events ? "shared without message bodies" : "redacted");
  if (lane.status === "ok" && laneEmpty(lane)) notes.push(kind.emptyNote || "no data in this window");
  else if (lane.status === "ok" && kind.notes) notes.push(...kind.notes(lane));
  return notes;
}

function logsHeight(lane) {
  return lane.mode === "list" ? 36 : 14 * Math.max(1, SEVERITY_ROWS.filter((n) => n === "info" || lane.counts[n].some((c) => c > 0)).length);
}

// Drawings: Plotly traces per kind.
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
  // sorted as numbers in a typed array, not with a comparator: about half the time for the reference
  // view's 36,000 cells (6 against 11 ms on a busy machine)
  const values = Float64Array.from(cells.flat().filter((v) => v !== null)).sort();
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

// Readouts: the nearest bucket's value (a band's median and range, a sum against its capacity, a
// heatmap's spread across nodes, log lines per bucket, busy rows of a span lane).
function lineReadout(lane, t, unit, b) {
  const line = lane.lines[0];
  if (!line) return "";
  const i = nearest(line.t, t);
  return i < 0 ? "" : formatValue(line.y[i], unit, b);
}

function bandReadout(lane, t, unit, b) {
  const i = nearest(lane.t, t);
  if (i < 0 || lane.mid[i] === null) return "";
  return `${formatValue(lane.mid[i], unit, b)} (${formatValue(lane.lo[i], unit, b)} – ${formatValue(lane.hi[i], unit, b)})`;
}

function sumReadout(lane, t, unit, b) {
  const i = nearest(lane.t, t);
  if (i < 0 || lane.sum[i] === null) return "";
  const text = formatValue(lane.sum[i], unit, b);
  const cap = lane.capacity && lane.capacity.y.length ? capacityAt(lane.capacity, t) : null;
  return cap ? `${text} = ${Math.round((100 * lane.sum[i]) / cap)} % of ${formatValue(cap, unit, b)}` : text;
}

function heatmapReadout(lane, t, unit, b) {
  const i = nearest(lane.t, t);
  if (i < 0) return "";
  const column = lane.z.map((row) => cellValue(lane, row[i])).filter((v) => v !== null);
  if (!column.length) return "";
  column.sort((x, y) => x - y);
  return `nodes ${formatValue(column[0], unit, b)} – ${formatValue(column[column.length - 1], unit, b)}`;
}

function logsReadout(lane, t) {
  if (lane.mode === "list") return `${lane.events.length} lines`;
  const i = nearest(lane.t, t);
  if (i < 0) return "";
  const n = SEVERITY_ROWS.reduce((s, k) => s + lane.counts[k][i], 0);
  return `${n} lines / ${Math.round(lane.step_ms / 1000)} s`;
}

function spansReadout(lane, t) {
  const active = new Set(lane.segments.filter((s) => s.start <= t && t <= s.end).map((s) => s.row));
  return `${active.size} of ${lane.rows.length} ${lane.row_key || "rows"} busy`;
}

function capacityAt(capacity, t) {
  let value = capacity.y[0];
  for (let i = 0; i < capacity.t.length && capacity.t[i] <= t; i += 1) value = capacity.y[i];
  return value;
}

function nearest(xs, t) {
  if (!xs || !xs.length) return -1;
  let lo = 0;
  let hi = xs.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid] < t) lo = mid + 1;
    else hi = mid;
  }
  if (lo > 0 && Math.abs(xs[lo - 1] - t) < Math.abs(xs[lo] - t)) lo -= 1;
  const spacing = xs.length > 1 ? (xs[xs.length - 1] - xs[0]) / (xs.length - 1) : Infinity;
  return Math.abs(xs[lo] - t) <= spacing * 1.5 ? lo : -1;
}
