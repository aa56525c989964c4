// Formatting shared by the war-room modules. Every string that comes from data (metric names,
// labels, log messages) goes through escapeHtml before it reaches Plotly's hover or annotation text,
// which parses a subset of HTML; DOM text is set with textContent only.

// The figure's margins around its plot area (px): the titles, readouts and overlays laid over the
// figure are placed by them.
export const MARGIN = { l: 62, r: 64, t: 6, b: 34 };

const ENTITIES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(text) {
  return String(text ?? "").replace(/[&<>"']/g, (c) => ENTITIES[c]);
}

const UNIT_SUFFIX = {
  bytes: "B",
  bytes_per_second: "B/s",
  ops_per_second: "ops/s",
  seconds: "s",
  celsius: "°C",
  watts: "W",
  percent: "%",
};

// A heatmap cell's value: ``z`` counts whole steps of 10^cell_exponent (lane_payloads.schema.json).
// A power of ten below 1 divides, so 12 steps of 0.001 is 0.012, not 0.012000000000000002.
export function cellValue(lane, count) {
  if (count === null || count === undefined) return null;
  const exponent = lane.cell_exponent || 0;
  return exponent >= 0 ? count * 10 ** exponent : count / 10 ** -exponent;
}

// The unit a lane's values are in: counters drawn as rates gain "/s".
export function laneUnit(unit, fn) {
  const base = UNIT_SUFFIX[unit] ?? unit ?? "";
  if (fn === "rate") return base ? (base.endsWith("/s") ? base : `${base}/s`) : "/s";
  return base;
}

const SI = [
  [1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"],
];
const BINARY = [
  [2 ** 50, "Pi"], [2 ** 40, "Ti"], [2 ** 30, "Gi"], [2 ** 20, "Mi"], [2 ** 10, "Ki"],
];

// One convention per lane, written in its title: per-node NIC rates (the network signal) in binary
// prefixes, as a NIC's counters are read (GiB/s); storage array throughput and everything else in
// decimal SI prefixes, as capacities are sold (700 GB/s).
export function binaryLane(lane) {
  const unit = lane && lane.title ? laneUnit(lane.title.unit, lane.fn) : "";
  return Boolean(lane && lane.title && lane.title.signal === "network" && unit.startsWith("B"));
}

// The unit chip of a lane's title: the unit and, for bytes, which prefixes its numbers use.
export function unitLabel(lane) {
  const unit = laneUnit(lane.title.unit, lane.fn);
  if (!unit.startsWith("B")) return unit;
  return binaryLane(lane) ? `${unit} · binary: GiB = 2³⁰ B` : `${unit} · decimal: GB = 10⁹ B`;
}

export function formatValue(value, unit = "", binary = false) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  if (value === 0) return unit ? `0 ${unit}` : "0";
  const abs = Math.abs(value);
  const space = unit && !unit.startsWith("°") && unit !== "%" ? " " : "";
  if (unit === "s" && abs < 1 && abs > 0) return `${(value * 1000).toPrecision(3)} ms`;
  for (const [size, prefix] of binary ? BINARY : SI) {
    if (abs >= size) return `${(value / size).toPrecision(3)}${space}${prefix}${unit}`;
  }
  const digits = abs >= 100 ? 0 : abs >= 10 ? 1 : abs >= 1 ? 2 : 3;
  return `${value.toFixed(digits)}${space}${unit}`;
}

// Plotly tick settings for a unit: SI prefixes on the ticks (500G, 1.2M); the unit itself is written
// once, in the lane's title, which reads better than "500GB/s" on every tick.
export function tickFormat(unit) {
  if (unit === "°C" || unit === "%") return { tickformat: "~r", ticksuffix: unit };
  return { tickformat: "~s", ticksuffix: "" };
}

export function formatTime(ms, withDate = true) {
  const iso = new Date(ms).toISOString();
  return withDate ? `${iso.slice(0, 10)} ${iso.slice(11, 19)}` : iso.slice(11, 19);
}

export function formatSpan(ms) {
  const s = Math.round(ms / 1000);
  if (s < 120) return `${s} s`;
  const m = Math.round(s / 60);
  if (m < 120) return `${m} min`;
  const h = s / 3600;
  if (h < 48) return `${h.toFixed(h < 10 ? 1 : 0)} h`;
  return `${(h / 24).toFixed(1)} d`;
}

export function labelText(labels) {
  return Object.entries(labels || {}).map(([k, v]) => `${k}=${v}`).join(", ");
}

// An organisation's colour, darkened until text in it reads on white (contrast at least 4.5:1).
export function readableColour(hex) {
  if (!/^#[0-9a-fA-F]{6}$/.test(hex || "")) return "#344054";
  let [r, g, b] = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
  const luminance = () => [r, g, b].map((c) => {
    const v = c / 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  }).reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
  for (let i = 0; i < 20 && 1.05 / (luminance() + 0.05) < 4.6; i++) [r, g, b] = [r, g, b].map((c) => Math.round(c * 0.88));
  return `rgb(${r},${g},${b})`;
}

// A clock offset or its uncertainty to three significant figures at most: "2.71 s", "46.3 ms", "7.6 ms".
export function durationText(ms) {
  const size = Math.abs(ms);
  if (size >= 1000) return `${(ms / 1000).toFixed(2)} s`;
  if (size >= 100) return `${Math.round(ms)} ms`;
  if (size >= 1) return `${Number(ms.toFixed(1))} ms`;
  return `${Number((ms * 1000).toFixed(0))} µs`;
}

// Colours of the figure: a hex colour with an alpha, lighter (factor > 0) or darker (factor < 0).
export function hexToRgba(hex, alpha) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${alpha})`;
}

export function shade(hex, factor) {
  const n = parseInt(hex.slice(1), 16);
  const mix = (c) => Math.round(factor < 0 ? c * (1 + factor) : c + (255 - c) * factor);
  const [r, g, b] = [(n >> 16) & 255, (n >> 8) & 255, n & 255].map(mix);
  return `rgb(${r},${g},${b})`;
}

export function hexOrRgba(colour, alpha) {
  if (colour.startsWith("#")) return hexToRgba(colour, alpha);
  return colour.replace("rgb(", "rgba(").replace(")", `,${alpha})`);
}

// A text cut to at most ``n`` characters, "…" marking the cut.
export function truncate(text, n) {
  const s = String(text ?? "");
  return s.length > n ? `${s.slice(0, n)}…` : s;
}

// An event's hover text, as every lane and strip of the figure writes it.
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
