// The scale forecast's chart: per resource, demand against the node count with its interval band, and
// its capacity as a dashed line; the target size as a vertical line.
const data = JSON.parse(document.getElementById("forecast-data").textContent);
const host = document.getElementById("forecast-chart");
const palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf"];
const traces = [];
data.traces.forEach((t, i) => {
  const colour = palette[i % palette.length];
  traces.push({ x: t.x, y: t.hi, mode: "lines", line: { width: 0 }, showlegend: false, hoverinfo: "skip", yaxis: `y${i ? i + 1 : ""}` });
  traces.push({
    x: t.x, y: t.lo, mode: "lines", line: { width: 0 }, fill: "tonexty", fillcolor: colour + "33",
    name: `${t.resource} 95 % interval`, hoverinfo: "skip", yaxis: `y${i ? i + 1 : ""}`,
  });
  traces.push({ x: t.x, y: t.y, mode: "lines", line: { color: colour }, name: `${t.resource} demand`, yaxis: `y${i ? i + 1 : ""}` });
  traces.push({
    x: [t.x[0], t.x[t.x.length - 1]], y: [t.capacity, t.capacity], mode: "lines",
    line: { color: colour, dash: "dash" }, name: `${t.resource} capacity`, yaxis: `y${i ? i + 1 : ""}`,
  });
});
// One stacked axis per resource: their units differ (operations/s, bytes/s, RPC slots).
const layout = { height: 260 * Math.max(data.traces.length, 1), margin: { l: 70, r: 20, t: 20, b: 40 },
  xaxis: { title: { text: "nodes" } }, shapes: [], legend: { orientation: "h" } };
const n = data.traces.length;
data.traces.forEach((t, i) => {
  const top = 1 - i / n, bottom = 1 - (i + 1) / n + 0.04;
  layout[`yaxis${i ? i + 1 : ""}`] = {
    domain: [bottom, top],
    title: { text: `${t.resource.split("/").pop()}${t.unit ? ` (${t.unit})` : ""}`, font: { size: 10 } },
  };
});
// The node axis under the lowest panel (panels are stacked top to bottom).
layout.xaxis.anchor = n > 1 ? `y${n}` : "y";
layout.shapes.push({ type: "line", xref: "x", yref: "paper", x0: data.nodes, x1: data.nodes, y0: 0, y1: 1, line: { dash: "dot", color: "#555" } });
window.Plotly.newPlot(host, traces, layout, { displaylogo: false, responsive: true });
