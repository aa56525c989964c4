// The scale forecast's chart: per resource, demand against the node count with its interval band, its
// capacity as a dashed line and each observed run as a point; the target size as a vertical line.
// Drawn on the forecast page (from its embedded data) and in the war room's forecast panel (from the
// API's `chart`). Plotly renders a few tags in names and titles: every name from the data is escaped.
import { escapeHtml as plain } from "../format.js";

// Figures as the forecast page prints them (api_forecast.human): three significant digits, an SI prefix.
const UNITS = { bytes_per_second: "B/s", bytes: "B", ops_per_second: "ops/s", seconds: "s" };
export function unitText(unit) {
  return UNITS[unit] ?? String(unit || "").replace("_per_second", "/s");
}

export function human(value, unit) {
  if (value === null || value === undefined) return "\u2013";
  const suffix = unitText(unit);
  const g3 = (v) => String(Number(v.toPrecision(3)));
  const magnitude = Math.abs(value);
  for (const [factor, prefix] of [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
    if (magnitude >= factor) return `${g3(value / factor)} ${prefix}${suffix}`.trimEnd();
  }
  return `${g3(value)} ${suffix}`.trimEnd();
}

const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf"];

// The figure of `data` (api_forecast.chart_data): one stacked panel per resource (their units differ:
// operations/s, bytes/s, RPC slots). `compact` draws it small, without a legend (the war room's side).
export function forecastFigure(data, { compact = false } = {}) {
  const traces = [];
  const n = data.traces.length;
  data.traces.forEach((t, i) => {
    const colour = PALETTE[i % PALETTE.length];
    const yaxis = `y${i ? i + 1 : ""}`;
    const name = plain(t.resource);
    traces.push({ x: t.x, y: t.hi, mode: "lines", line: { width: 0 }, showlegend: false, hoverinfo: "skip", yaxis });
    traces.push({
      x: t.x, y: t.lo, mode: "lines", line: { width: 0 }, fill: "tonexty", fillcolor: colour + "33",
      name: `${name} 95 % interval`, hoverinfo: "skip", yaxis,
    });
    traces.push({ x: t.x, y: t.y, mode: "lines", line: { color: colour }, name: `${name} demand`, yaxis });
    traces.push({
      x: [t.x[0], t.x[t.x.length - 1]], y: [t.capacity, t.capacity], mode: "lines",
      line: { color: colour, dash: "dash" }, name: `${name} capacity`, yaxis,
    });
    const observed = t.observed || [];
    if (observed.length) {
      traces.push({
        x: observed.map((p) => p.nodes), y: observed.map((p) => p.demand), mode: "markers",
        marker: { color: colour, size: compact ? 6 : 8, line: { color: "#fff", width: 1 } },
        name: `${name} observed runs`, yaxis,
      });
    }
  });
  const height = compact ? (n > 1 ? 130 * n : 190) : 260 * Math.max(n, 1);
  const layout = {
    height,
    margin: compact ? { l: 46, r: 8, t: 8, b: 34 } : { l: 70, r: 20, t: 20, b: 40 },
    xaxis: { title: { text: "nodes", font: { size: compact ? 10 : 12 } } },
    shapes: [],
    showlegend: !compact,
    legend: { orientation: "h" },
    font: { size: compact ? 9 : 12 },
  };
  data.traces.forEach((t, i) => {
    const top = 1 - i / n, bottom = 1 - (i + 1) / n + (compact ? 0.08 : 0.04);
    const title = `${plain(t.resource.split("/").pop())}${t.unit ? ` (${plain(unitText(t.unit))})` : ""}`;
    layout[`yaxis${i ? i + 1 : ""}`] = { domain: [bottom, top], title: { text: compact ? "" : title, font: { size: 10 } } };
    if (compact) {
      layout.annotations = layout.annotations || [];
      layout.annotations.push({
        xref: "paper", yref: "paper", x: 0, y: top, xanchor: "left", yanchor: "top", showarrow: false,
        text: title, font: { size: 9, color: "#344054" }, bgcolor: "rgba(255,255,255,0.7)",
      });
    }
  });
  // The node axis under the lowest panel (panels are stacked top to bottom).
  layout.xaxis.anchor = n > 1 ? `y${n}` : "y";
  layout.shapes.push({ type: "line", xref: "x", yref: "paper", x0: data.nodes, x1: data.nodes, y0: 0, y1: 1, line: { dash: "dot", color: "#555" } });
  return { traces, layout };
}

export function drawForecast(host, data, options = {}) {
  const { traces, layout } = forecastFigure(data, options);
  return window.Plotly.newPlot(host, traces, layout, { displaylogo: false, responsive: true, displayModeBar: !options.compact });
}

const embedded = document.getElementById("forecast-data");
if (embedded) drawForecast(document.getElementById("forecast-chart"), JSON.parse(embedded.textContent));
