// The report analyses' pictures: recovery (exclusions per node, retry chains on a time axis, automatic
// against manual success), the checkpoint I/O path (link use against RPC slots in use, write duration per
// step) and detections (by node over time, with the families that fired). Every chart draws the scoped
// API's answer for the page's window (the container's data-source), so its numbers are the API's; each
// has a sentence under it saying what it shows (its text alternative; the tables hold every figure).
// Names from other organisations reach Plotly's text through escapeHtml and the DOM as text only.
import { escapeHtml, formatTime, readableColour } from "../format.js";

const FONT = { family: "system-ui, -apple-system, 'Segoe UI', sans-serif", size: 11, color: "#344054" };
const AXIS = { gridcolor: "#eef0f3", linecolor: "#98a2b3", showline: true, zeroline: false, tickfont: { size: 11, color: "#1d2330" } };
const MUTED = "#c5cbd3";
const SUCCESS = "#15803d";
const FAILURE = "#b91c1c";
const TRIGGER = "#475467";
const CAPACITY = "#374151";
const PALETTE = ["#1d4ed8", "#c2410c", "#15803d", "#7e22ce", "#b91c1c", "#0e7490", "#a16207", "#be185d"];
const CONFIG = { displaylogo: false, displayModeBar: false, responsive: true };

// API times (RFC 3339, µs, UTC) as Plotly reads them: wall-clock UTC, no zone conversion.
export const plotTime = (ts) => String(ts).replace("T", " ").replace("Z", "");
const seconds = (ts) => formatTime(Date.parse(ts));
// Shares (0-1) are drawn as percentages, unrounded: what a chart holds is the API's figure times 100.
const pct = (share) => (share === null || share === undefined ? null : 100 * share);
const pctText = (value) => (value === null || value === undefined ? "–" : `${value.toFixed(1)} %`);

function layout(extra) {
  return {
    height: 320, margin: { l: 62, r: 20, t: 36, b: 70 }, font: FONT, plot_bgcolor: "#ffffff", paper_bgcolor: "#ffffff",
    hovermode: "closest", hoverlabel: { namelength: -1, font: { size: 11 }, align: "left" }, showlegend: true,
    legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom", font: { size: 11 } }, ...extra,
  };
}

function draw(figure, key, traces, plotLayout, caption) {
  const div = figure.querySelector(`[data-chart="${key}"]`);
  if (!div) return null;
  const text = div.parentElement.querySelector("figcaption");
  // an id of its own: the caption's place among the page's captions
  text.id = text.id || `caption-${key}-${[...document.querySelectorAll("figcaption")].indexOf(text) + 1}`;
  text.textContent = caption;
  // The picture repeats the caption's figures for sighted readers; assistive technology reads the caption.
  div.setAttribute("aria-hidden", "true");
  div.parentElement.setAttribute("aria-describedby", text.id);
  return window.Plotly.newPlot(div, traces, plotLayout, CONFIG);
}

function orgColour(events, org) {
  const found = Object.values(events || {}).find((e) => e.org === org && e.colour);
  return found ? readableColour(found.colour) : "#344054";
}

// ----------------------------------------------------------------------------- recovery

function exclusionsChart(box, s, colour) {
  const ex = s.exclusions;
  const top = new Set(ex.top_entities);
  const rows = ex.per_entity;
  const trace = (name, pick, color) => ({
    type: "bar", name, x: rows.filter(pick).map((r) => escapeHtml(r.entity)), y: rows.filter(pick).map((r) => r.count),
    marker: { color, line: { width: 0 } }, hovertemplate: "%{x}: %{y} exclusions<extra></extra>",
  });
  const traces = [trace(`top ${ex.top} nodes`, (r) => top.has(r.entity), colour), trace("other nodes", (r) => !top.has(r.entity), MUTED)];
  const share = ex.top_share === null ? "–" : pctText(pct(ex.top_share));
  const caption = ex.total
    ? `Exclusions per node (${s.org}'s scheduler): ${ex.total} on ${ex.entities} nodes; the top ${ex.top} ` +
      `(${ex.top_entities.join(", ")}) hold ${share} of them, drawn in colour, the others in grey.`
    : `No node exclusions in this window (${s.org}'s scheduler).`;
  return draw(box, "exclusions", traces, layout({
    xaxis: { ...AXIS, type: "category", categoryorder: "array", categoryarray: rows.map((r) => escapeHtml(r.entity)), tickangle: -45, automargin: true },
    yaxis: { ...AXIS, title: { text: "exclusions" }, rangemode: "tozero" }, barmode: "overlay",
  }), caption);
}

function ratesChart(box, s, colour) {
  const { retries, manual } = s;
  const bars = [];
  if (retries.success_rate !== null) {
    const ended = Math.round(retries.succeeded / retries.success_rate);
    bars.push({ name: "automatic retry chains", value: pct(retries.success_rate), text: `${pctText(pct(retries.success_rate))} (${retries.succeeded} of ${ended})`, color: colour });
  }
  if (manual.success_rate !== null && manual.success_rate !== undefined) {
    bars.push({ name: "manual recoveries", value: pct(manual.success_rate), text: `${pctText(pct(manual.success_rate))} (${manual.succeeded} of ${manual.count})`, color: TRIGGER });
  }
  const traces = [{
    type: "bar", x: bars.map((b) => b.name), y: bars.map((b) => b.value), text: bars.map((b) => b.text),
    textposition: "outside", cliponaxis: false, marker: { color: bars.map((b) => b.color) },
    hovertemplate: "%{x}: %{y:.1f} %<extra></extra>", showlegend: false,
  }];
  const parts = bars.map((b) => `${b.name} ${b.text}`);
  if (manual.success_rate === null || manual.success_rate === undefined) parts.push("manual outcomes not visible to you");
  const ratio = s.auto_vs_manual === null ? "" : `; automatic retry succeeds ${s.auto_vs_manual} times as often`;
  const caption = `Success rate of recovery (${s.org}'s scheduler): ${parts.join("; ")}${ratio}.`;
  return draw(box, "rates", traces, layout({
    showlegend: false, margin: { l: 62, r: 20, t: 16, b: 50 }, xaxis: { ...AXIS, type: "category" }, yaxis: { ...AXIS, title: { text: "success rate (%)" }, range: [0, 110], ticksuffix: " %" },
  }), caption);
}

function chainsChart(box, s, events, colour) {
  const chains = s.retries.chain_list;
  const at = (id) => (id === null || id === undefined || !events[id] ? null : events[id]);
  const line = { x: [], y: [] };
  const all = [];
  const marks = { trigger: { x: [], y: [] }, attempt: { x: [], y: [], text: [] }, succeeded: { x: [], y: [] }, exhausted: { x: [], y: [] } };
  for (const chain of chains) {
    const times = chain.events.map(at).filter(Boolean).map((e) => e.ts).sort();
    all.push(...times);
    if (times.length) line.x.push(plotTime(times[0]), plotTime(times[times.length - 1]), null);
    const name = escapeHtml(chain.chain);
    if (times.length) line.y.push(name, name, null);
    const trigger = at(chain.trigger_event);
    if (trigger) { marks.trigger.x.push(plotTime(trigger.ts)); marks.trigger.y.push(name); }
    chain.attempt_events.map(at).forEach((e, i) => {
      if (!e) return;
      marks.attempt.x.push(plotTime(e.ts)); marks.attempt.y.push(name); marks.attempt.text.push(`attempt ${i + 1}`);
    });
    const outcome = at(chain.outcome_event);
    if (outcome) {
      const into = chain.success ? marks.succeeded : marks.exhausted;
      into.x.push(plotTime(outcome.ts)); into.y.push(name);
    }
  }
  const traces = [
    { type: "scatter", mode: "lines", name: "chain", ...line, line: { color: MUTED, width: 2 }, hoverinfo: "skip", showlegend: false },
    { type: "scatter", mode: "markers", name: "failure that started it", ...marks.trigger, marker: { symbol: "triangle-down", size: 10, color: TRIGGER },
      hovertemplate: "%{y}: failure %{x|%H:%M:%S}<extra></extra>" },
    { type: "scatter", mode: "markers", name: "attempt", ...marks.attempt, marker: { symbol: "circle-open", size: 9, color: colour, line: { width: 2 } },
      hovertemplate: "%{y}: %{text} %{x|%H:%M:%S}<extra></extra>" },
    { type: "scatter", mode: "markers", name: "chain succeeded", ...marks.succeeded, marker: { symbol: "star", size: 13, color: SUCCESS },
      hovertemplate: "%{y}: succeeded %{x|%H:%M:%S}<extra></extra>" },
    { type: "scatter", mode: "markers", name: "chain exhausted (failed)", ...marks.exhausted, marker: { symbol: "x", size: 11, color: FAILURE },
      hovertemplate: "%{y}: exhausted %{x|%H:%M:%S}<extra></extra>" },
  ];
  const succeeded = chains.filter((c) => c.success === true).length;
  const failed = chains.filter((c) => c.success === false).length;
  all.sort();
  const span = all.length ? ` between ${seconds(all[0])} and ${seconds(all[all.length - 1])} UTC` : "";
  const caption = `Retry chains on a time axis (${s.org}'s scheduler): ${chains.length} chains${span}, ` +
    `${s.retries.attempts} attempts (circles); ${succeeded} succeeded (stars), ${failed} exhausted (crosses), ` +
    `${chains.length - succeeded - failed} had not ended.`;
  return draw(box, "chains", traces, layout({
    height: Math.max(240, 110 + 26 * chains.length), margin: { l: 150, r: 20, t: 36, b: 60 },
    xaxis: { ...AXIS, type: "date", title: { text: "time (UTC)" } },
    yaxis: { ...AXIS, type: "category", categoryorder: "array", categoryarray: chains.map((c) => escapeHtml(c.chain)).reverse(), automargin: true },
  }), caption);
}

function drawRecovery(data) {
  const drawn = [];
  for (const s of data.schedulers) {
    const box = [...document.querySelectorAll(".report-charts[data-org]")].find((el) => el.dataset.org === s.org);
    if (!box) continue;
    const colour = orgColour(data.events, s.org);
    drawn.push(exclusionsChart(box, s, colour), ratesChart(box, s, colour));
    if (s.retries.chain_list.length) drawn.push(chainsChart(box, s, data.events, colour));
  }
  return drawn;
}

// ----------------------------------------------------------------------------- checkpoints

// A checkpoint on the category axis: its step, else its start (the time of day, with the date when the
// window holds several days).
export function checkpointLabel(c, oneDay = true) {
  if (c.step !== null && c.step !== undefined) return escapeHtml(`step ${c.step}`);
  const shown = formatTime(Date.parse(c.start));
  return oneDay ? shown.slice(11) : shown.slice(5);
}

const labeller = (checkpoints) => {
  const oneDay = new Set(checkpoints.map((c) => String(c.start).slice(0, 10))).size <= 1;
  return (c) => checkpointLabel(c, oneDay);
};

// Per checkpoint: the link's use (the writes' own, else the fleet's) and the RPC slots in use, in % of
// the link's capacity and of the slot table, side by side.
export function paradoxFigures(c, label = checkpointLabel) {
  const own = Array.isArray(c.link_fraction) && c.link_fraction.length === 2;
  const link = own ? c.link_fraction : c.fleet_link_fraction;
  return {
    label: label(c),
    link: link ? pct(link[1]) : null,
    linkLow: link ? pct(link[0]) : null,
    linkSource: own ? "writes" : link ? "fleet" : null,
    slots: c.fleet_slots_mean === null || c.fleet_slots_mean === undefined ? null : pct(c.fleet_slots_mean / c.fleet_slot_table),
    full: pct(c.fleet_slot_full_share),
  };
}

function paradoxChart(box, data) {
  const label = labeller(data.checkpoints);
  const rows = data.checkpoints.map((c) => paradoxFigures(c, label));
  const x = rows.map((r) => r.label);
  const traces = [
    { type: "bar", name: "storage link in use (bar: busiest node; whisker: lowest)", x, y: rows.map((r) => r.link),
      error_y: { type: "data", symmetric: false, array: rows.map(() => 0), arrayminus: rows.map((r) => (r.link === null ? 0 : r.link - r.linkLow)), color: "#1e3a8a", thickness: 1.2 },
      marker: { color: "#1d4ed8" }, texttemplate: "%{y:.1f} %", textposition: "outside", cliponaxis: false,
      hovertemplate: "%{x}: link %{y:.1f} % of its capacity<extra></extra>" },
    { type: "bar", name: "RPC slots in use (fleet mean, % of the table)", x, y: rows.map((r) => r.slots),
      marker: { color: "#c2410c" }, texttemplate: "%{y:.1f} %", textposition: "inside", insidetextanchor: "end",
      textfont: { color: "#ffffff" }, hovertemplate: "%{x}: %{y:.1f} % of the RPC slot table in use<extra></extra>" },
    { type: "scatter", mode: "markers", name: "time at a full slot table (fleet)", x, y: rows.map((r) => r.full),
      marker: { symbol: "diamond", size: 10, color: CAPACITY }, hovertemplate: "%{x}: table full %{y:.0f} % of the time<extra></extra>" },
  ];
  const links = rows.map((r) => r.link).filter((v) => v !== null);
  const lows = rows.map((r) => r.linkLow).filter((v) => v !== null);
  const slots = rows.map((r) => r.slots).filter((v) => v !== null);
  const verdicts = Object.entries(data.summary.checkpoint_attributions || {}).map(([v, n]) => `${v}: ${n}`).join(", ");
  const fleet = rows.some((r) => r.linkSource === "fleet") ? " (the fleet's links: no write can be joined to its node for you)" : "";
  const caption = `Link use against RPC slots in use, per checkpoint (${rows.length}): the storage link carries ` +
    `${links.length ? `${pctText(Math.min(...lows))} to ${pctText(Math.max(...links))}` : "an unknown share"} of its capacity${fleet}, ` +
    `while ${slots.length ? `${pctText(Math.min(...slots))} to ${pctText(Math.max(...slots))}` : "an unknown share"} of the RPC slot table is in use. ` +
    `Attribution: ${verdicts || "none"}.`;
  return draw(box, "paradox", traces, layout({
    barmode: "group", xaxis: { ...AXIS, type: "category" },
    yaxis: { ...AXIS, title: { text: "% of capacity" }, range: [0, 108], ticksuffix: " %" }, height: 360,
  }), caption);
}

function durationsChart(box, data) {
  const label = labeller(data.checkpoints);
  const x = [], y = [], text = [];
  for (const c of data.checkpoints) {
    for (const w of c.writes) { x.push(label(c)); y.push(w.duration_s); text.push(escapeHtml(w.entity)); }
  }
  const traces = [
    { type: "scatter", mode: "markers", name: "one node's write", x, y, text, marker: { size: 6, color: "rgba(29,78,216,0.45)" },
      hovertemplate: "%{x} · %{text}: %{y:.0f} s<extra></extra>" },
    { type: "scatter", mode: "lines+markers", name: "checkpoint (first start to last end)", x: data.checkpoints.map(label),
      y: data.checkpoints.map((c) => c.duration_s), marker: { symbol: "diamond", size: 10, color: CAPACITY }, line: { color: CAPACITY, width: 1, dash: "dot" },
      hovertemplate: "%{x}: %{y:.0f} s<extra></extra>" },
  ];
  const whole = data.checkpoints.map((c) => c.duration_s);
  const caption = y.length
    ? `Write duration per step: checkpoints took ${Math.min(...whole).toFixed(0)} s to ${Math.max(...whole).toFixed(0)} s; ` +
      `single node writes ${Math.min(...y).toFixed(0)} s to ${Math.max(...y).toFixed(0)} s (${y.length} writes).`
    : "No checkpoint writes in this window.";
  return draw(box, "durations", traces, layout({
    height: 360, xaxis: { ...AXIS, type: "category" },
    yaxis: { ...AXIS, title: { text: "duration (s)" }, rangemode: "tozero", ticksuffix: " s" },
  }), caption);
}

function drawCheckpoints(data) {
  const box = document.getElementById("report-charts");
  if (!data.checkpoints.length) return [];
  return [paradoxChart(box, data), durationsChart(box, data)];
}

// ----------------------------------------------------------------------------- detections

// Escaped: Plotly reads a subset of HTML in axis labels, legends and hovers.
export function detectionNode(e) {
  const resource = e.resource || {};
  return escapeHtml(resource.node ?? Object.values(resource)[0] ?? "(no node)");
}

export function detectionFamilies(e) {
  if (e.redacted) return ["(hidden)"];
  const families = String((e.attributes || {}).families || "").split(",").map((f) => escapeHtml(f.trim())).filter(Boolean);
  return families.length ? families : ["(none listed)"];
}

function drawDetections(data) {
  const box = document.getElementById("report-charts");
  const events = data.events || [];
  if (!events.length) return [];
  const families = [...new Set(events.flatMap(detectionFamilies))].sort();
  const nodes = [...new Set(events.map(detectionNode))].sort();
  const symbols = ["circle", "square", "diamond", "triangle-up", "cross", "star", "hexagon", "pentagon"];
  const traces = families.map((family, i) => {
    const fired = events.filter((e) => detectionFamilies(e).includes(family));
    return {
      type: "scatter", mode: "markers", name: family, x: fired.map((e) => plotTime(e.ts)), y: fired.map(detectionNode),
      text: fired.map((e) => escapeHtml(`${e.org}: ${detectionFamilies(e).join(", ")}`)),
      marker: { symbol: `${symbols[i % symbols.length]}-open`, size: 16 - 2 * Math.min(i, 4), color: PALETTE[i % PALETTE.length], line: { width: 2 } },
      hovertemplate: "%{y} %{x|%H:%M:%S}: %{text}<extra></extra>",
    };
  });
  const counts = families.map((f) => `${f} ${events.filter((e) => detectionFamilies(e).includes(f)).length}`);
  const times = events.map((e) => e.ts).sort();
  const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;
  const caption = `Detections by node over time: ${plural(events.length, "detection", "detections")} on ` +
    `${plural(nodes.length, "node", "nodes")} between ${seconds(times[0])} and ` +
    `${seconds(times[times.length - 1])} UTC; the families that fired (detections each): ${counts.join(", ")}.`;
  return [draw(box, "detections", traces, layout({
    height: Math.max(260, 120 + 24 * nodes.length), margin: { l: 110, r: 20, t: 36, b: 60 },
    xaxis: { ...AXIS, type: "date", title: { text: "time (UTC)" }, range: [plotTime(data.from), plotTime(data.to)] },
    yaxis: { ...AXIS, type: "category", categoryorder: "array", categoryarray: [...nodes].reverse(), automargin: true },
  }), caption)];
}

// ----------------------------------------------------------------------------- start

const DRAW = { recovery: drawRecovery, checkpoints: drawCheckpoints, detections: drawDetections };

async function start() {
  const host = document.getElementById("report-charts");
  if (!host || !host.dataset.source || !window.Plotly) return;
  const response = await fetch(host.dataset.source, { credentials: "same-origin", headers: { Accept: "application/json" } });
  if (!response.ok) {
    document.body.dataset.charts = "failed";
    return;
  }
  const data = await response.json();
  const drawn = (DRAW[host.dataset.kind] || (() => []))(data).filter(Boolean);
  await Promise.all(drawn);
  document.body.dataset.charts = String(drawn.length);
}

start();
