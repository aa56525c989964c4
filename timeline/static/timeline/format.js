// Formatting shared by the war-room modules. Every string that comes from data (metric names,
// labels, log messages) goes through escapeHtml before it reaches Plotly's hover or annotation text,
// which parses a subset of HTML; DOM text is set with textContent only.

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

// The unit a lane's values are in: counters drawn as rates gain "/s".
export function laneUnit(unit, fn) {
  const base = UNIT_SUFFIX[unit] ?? unit ?? "";
  if (fn === "rate") return base ? (base.endsWith("/s") ? base : `${base}/s`) : "/s";
  return base;
}

const SI = [
  [1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"],
];

export function formatValue(value, unit = "") {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  if (value === 0) return unit ? `0 ${unit}` : "0";
  const abs = Math.abs(value);
  const space = unit && !unit.startsWith("°") && unit !== "%" ? " " : "";
  if (unit === "s" && abs < 1 && abs > 0) return `${(value * 1000).toPrecision(3)} ms`;
  for (const [size, prefix] of SI) {
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
