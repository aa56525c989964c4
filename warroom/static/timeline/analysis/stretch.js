// The statistics of a stretch selected on a lane (min, max, mean, percentiles, time above capacity),
// against the stretch as long just before it, from the scoped API.
import { durationText, formatSpan, formatTime, formatValue, laneUnit, readableColour } from "../format.js";
import { canonicalSpec } from "../spec.js";
import { $, colourOf, el } from "./elements.js";

const SELECTION = "/api/v1/analysis/selection";

const STATS = [
  ["min", "min"], ["max", "max"], ["mean", "mean"], ["p50", "median (p50)"], ["p95", "p95"], ["p99", "p99"],
  ["count", "samples"], ["above_capacity_s", "time above capacity"],
];

// A stretch of a lane selected on the figure: its statistics and its baseline's, from the API.
export async function selectStretch(panel, { spec, lane, from_ms, to_ms }) {
  panel.stretch = { spec: canonicalSpec(spec) || spec, from_ms, to_ms };
  panel.stretchLane = lane || null;
  document.body.classList.add("wr-analysing");
  panel.host.changed();
  panel.host.redraw();
  await loadStretch(panel);
}

export async function loadStretch(panel) {
  const box = $("stretch-panel");
  const stretch = panel.stretch;
  box.hidden = !stretch;
  if (!stretch) return;
  if (panel.stretchController) panel.stretchController.abort();
  const controller = new AbortController();
  panel.stretchController = controller;
  box.dataset.state = "loading";
  const lane = panel.stretchLane;
  const title = $("stretch-lane");
  title.replaceChildren();
  if (lane && lane.title) {
    const dot = el("span", "org-dot");
    dot.style.background = colourOf(lane.title.colour);
    const org = el("b", "", lane.title.org);
    org.style.color = readableColour(colourOf(lane.title.colour));
    title.append(dot, org, document.createTextNode(` · ${lane.title.signal} · ${lane.title.what}`));
  } else title.textContent = stretch.spec;
  title.title = stretch.spec;
  const length = stretch.to_ms - stretch.from_ms;
  $("stretch-when").textContent = `${formatTime(stretch.from_ms)} – ${formatTime(stretch.to_ms, false)} UTC (${formatSpan(length)}), against the ${formatSpan(length)} before`;
  $("stretch-status").textContent = "reading…";
  const q = new URLSearchParams({ lane: stretch.spec, from: new Date(Math.round(stretch.from_ms)).toISOString(), to: new Date(Math.round(stretch.to_ms)).toISOString() });
  if (!panel.host.aligned()) q.set("align", "off");
  try {
    const body = await panel.host.getJson(`${SELECTION}?${q}`, controller.signal);
    if (controller.signal.aborted) return;
    panel.stretchBody = body;
    renderStretch(body, lane);
    box.dataset.state = "ready";
  } catch (error) {
    if (error.name === "AbortError") return;
    $("stretch-table").tBodies[0].replaceChildren();
    $("stretch-status").textContent = `No statistics: ${error.message}`;
    box.dataset.state = "error";
  }
}

function renderStretch(body, lane) {
  const unit = lane && lane.title ? laneUnit(lane.title.unit, lane.fn) : "";
  const binary = Boolean(lane && lane.title && lane.title.signal === "network" && unit.startsWith("B"));
  const value = (name, v) => {
    if (v === null || v === undefined) return name === "above_capacity_s" ? "no capacity" : "–";
    if (name === "count") return Number(v).toLocaleString("en");
    if (name === "above_capacity_s") return formatSpan(v * 1000);
    return formatValue(v, unit, binary);
  };
  const rows = STATS.map(([name, text]) => {
    const row = el("tr");
    row.dataset.stat = name;
    row.appendChild(el("th", "", text)).setAttribute("scope", "row");
    for (const side of ["selection", "baseline"]) {
      const v = body[side][name];
      const cell = el("td", "", value(name, v));
      cell.dataset.side = side;
      cell.dataset.value = v === null || v === undefined ? "" : String(v);
      if (name === "above_capacity_s" && body[side].above_capacity_share !== null) {
        cell.appendChild(el("span", "wr-share", ` ${Math.round(100 * body[side].above_capacity_share)} %`));
      }
      row.appendChild(cell);
    }
    row.appendChild(el("td", "wr-delta", delta(name, body.selection[name], body.baseline[name])));
    return row;
  });
  $("stretch-table").tBodies[0].replaceChildren(...rows);
  const series = body.selection.series;
  $("stretch-status").textContent = `${series.toLocaleString("en")} series read; percentiles of ${durationText(body.step_ms)} buckets.`;
}

function delta(name, now, before) {
  if (typeof now !== "number" || typeof before !== "number") return "";
  if (name === "above_capacity_s") return now === before ? "" : `${now > before ? "+" : "−"}${formatSpan(Math.abs(now - before) * 1000)}`;
  if (before === 0) return now === 0 ? "=" : "new";
  const ratio = now / before;
  if (Math.abs(ratio - 1) < 0.005) return "=";
  return ratio >= 10 ? `×${Math.round(ratio)}` : `${ratio > 1 ? "+" : "−"}${Math.round(Math.abs(ratio - 1) * 100)} %`;
}

export function clearStretch(panel) {
  panel.stretch = null;
  panel.stretchBody = null;
  if (panel.stretchController) panel.stretchController.abort();
  $("stretch-panel").hidden = true;
  document.body.classList.toggle("wr-analysing", panel.open);
  panel.host.changed();
  panel.host.redraw();
}
