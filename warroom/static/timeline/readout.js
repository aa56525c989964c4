// Where the mouse is on the lanes: the crosshair, its time, and the value each lane shows there, in the
// readout beside its title (the nearest bucket's value: a band's median and range, a sum against its
// capacity, a heatmap's spread across nodes, log lines per bucket, busy rows of a span lane).
import { MARGIN, SEVERITY_ROWS } from "./figure.js";
import { binaryLane, cellValue, formatTime, formatValue, laneUnit } from "./format.js";
import { $ } from "./page.js";
import { view } from "./state.js";
import { plotArea } from "./zoom.js";

export function bindCrosshair() {
  $("figure").addEventListener("mousemove", onMouseMove);
  $("figure").addEventListener("mouseleave", () => {
    $("crosshair").hidden = true;
  });
}

function onMouseMove(event) {
  const area = plotArea();
  const cross = $("crosshair");
  if (!area || !view.geometry) return;
  const rect = $("figure").getBoundingClientRect();
  const x = event.clientX - rect.left - area.left;
  if (x < 0 || x > area.width) {
    cross.hidden = true;
    return;
  }
  const t = area.range[0] + (x / area.width) * (area.range[1] - area.range[0]);
  view.crosshairMs = t;
  cross.hidden = false;
  cross.style.left = `${area.left + x}px`;
  cross.style.top = `${MARGIN.t}px`;
  cross.style.height = `${view.geometry.plotHeight}px`;
  $("crosshair-time").textContent = formatTime(t);
  for (const row of view.geometry.rows) {
    if (row.readout) row.readout.textContent = readout(row.lane, t);
  }
}

// The value a lane shows at instant `t` (ms), for the readout beside its title.
function readout(lane, t) {
  if (!lane || lane.status !== "ok") return "";
  const unit = laneUnit(lane.title.unit, lane.fn);
  const b = binaryLane(lane);
  const at = (xs) => nearest(xs, t);
  switch (lane.kind) {
    case "line":
    case "rate": {
      const line = lane.lines[0];
      if (!line) return "";
      const i = at(line.t);
      return i < 0 ? "" : formatValue(line.y[i], unit, b);
    }
    case "band": {
      const i = at(lane.t);
      if (i < 0 || lane.mid[i] === null) return "";
      return `${formatValue(lane.mid[i], unit, b)} (${formatValue(lane.lo[i], unit, b)} – ${formatValue(lane.hi[i], unit, b)})`;
    }
    case "sum": {
      const i = at(lane.t);
      if (i < 0 || lane.sum[i] === null) return "";
      const text = formatValue(lane.sum[i], unit, b);
      const cap = lane.capacity && lane.capacity.y.length ? capacityAt(lane.capacity, t) : null;
      return cap ? `${text} = ${Math.round((100 * lane.sum[i]) / cap)} % of ${formatValue(cap, unit, b)}` : text;
    }
    case "heatmap": {
      const i = at(lane.t);
      if (i < 0) return "";
      const column = lane.z.map((row) => cellValue(lane, row[i])).filter((v) => v !== null);
      if (!column.length) return "";
      column.sort((a, b) => a - b);
      return `nodes ${formatValue(column[0], unit, b)} – ${formatValue(column[column.length - 1], unit, b)}`;
    }
    case "logs": {
      if (lane.mode === "list") return `${lane.events.length} lines`;
      const i = at(lane.t);
      if (i < 0) return "";
      const n = SEVERITY_ROWS.reduce((s, k) => s + lane.counts[k][i], 0);
      return `${n} lines / ${Math.round(lane.step_ms / 1000)} s`;
    }
    case "spans": {
      const active = new Set(lane.segments.filter((s) => s.start <= t && t <= s.end).map((s) => s.row));
      return `${active.size} of ${lane.rows.length} ${lane.row_key || "rows"} busy`;
    }
    default:
      return "";
  }
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
