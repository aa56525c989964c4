// Jointline timeline page: stacked lanes on one time axis, drawn from the scoped read API.
// Every string that comes from data (metric names, labels, log messages) is escaped before it
// reaches the DOM or Plotly's hover text, which accepts a subset of HTML.
"use strict";

const MAX_DEFAULT_LANES = 12;
const state = { series: [], selected: [], from: "now-3h", to: "now" };

function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function labelText(labels) {
  return Object.entries(labels).map(([k, v]) => `${k}=${v}`).join(", ");
}

function readUrl() {
  const params = new URLSearchParams(window.location.search);
  state.from = params.get("from") || state.from;
  state.to = params.get("to") || state.to;
  const lanes = params.get("lanes");
  state.selected = lanes ? lanes.split(",").map(Number).filter(Boolean) : [];
}

function writeUrl() {
  const params = new URLSearchParams({ from: state.from, to: state.to, lanes: state.selected.join(",") });
  window.history.replaceState(null, "", `${window.location.pathname}?${params}`);
}

async function getJson(url) {
  const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
  return body;
}

function setStatus(text) {
  document.getElementById("status").textContent = text;
}

function renderPicker() {
  const filter = document.getElementById("lane-filter").value.toLowerCase();
  const list = document.getElementById("lane-list");
  list.replaceChildren();
  let group = null;
  for (const s of state.series) {
    const text = `${s.metric} ${labelText(s.labels)}`;
    if (filter && !text.toLowerCase().includes(filter) && !s.org.includes(filter)) continue;
    const groupName = `${s.org} · ${s.signal}`;
    if (groupName !== group) {
      group = groupName;
      const heading = document.createElement("h3");
      heading.textContent = groupName;
      heading.style.borderLeft = `4px solid ${s.colour}`;
      list.appendChild(heading);
    }
    const label = document.createElement("label");
    const box = document.createElement("input");
    box.type = "checkbox";
    box.checked = state.selected.includes(s.id);
    box.addEventListener("change", () => {
      state.selected = box.checked ? [...state.selected, s.id] : state.selected.filter((id) => id !== s.id);
      refresh();
    });
    label.appendChild(box);
    label.appendChild(document.createTextNode(` ${s.metric}{${labelText(s.labels)}}`));
    list.appendChild(label);
  }
}

function plotWidth() {
  return Math.max(200, Math.min(4000, Math.round(document.getElementById("plot").clientWidth || 1000)));
}

function buildFigure(lanes, events) {
  const traces = [];
  const n = lanes.length + 1;
  const gap = 0.012;
  const height = 1 / n;
  const layout = {
    height: Math.max(360, 110 * n),
    margin: { l: 260, r: 20, t: 10, b: 40 },
    showlegend: false,
    hovermode: "x unified",
    xaxis: { type: "date", anchor: `y${n > 1 ? n : ""}`, showspikes: true, spikemode: "across", spikesnap: "cursor" },
    annotations: [],
  };
  const domain = (i) => [1 - (i + 1) * height + gap, 1 - i * height - gap];
  lanes.forEach((lane, i) => {
    const axis = i === 0 ? "y" : `y${i + 1}`;
    const s = lane.series;
    const x = lane.t.map((ms) => new Date(ms));
    const name = escapeHtml(`${s.metric}{${labelText(s.labels)}}`);
    traces.push({ x, y: lane.max, yaxis: axis, mode: "lines", line: { width: 0 }, hoverinfo: "skip", type: "scatter" });
    traces.push({
      x, y: lane.min, yaxis: axis, mode: "lines", line: { width: 0 }, fill: "tonexty",
      fillcolor: `${s.colour}40`, hoverinfo: "skip", type: "scatter",
    });
    traces.push({
      x, y: lane.mean, yaxis: axis, mode: "lines", line: { color: s.colour, width: 1.5 }, type: "scatter",
      name, hovertemplate: `${name}<br>%{y:.4g}${lane.fn === "rate" ? "/s" : ""}<extra></extra>`,
    });
    layout[i === 0 ? "yaxis" : `yaxis${i + 1}`] = { domain: domain(i), zeroline: false, fixedrange: true };
    layout.annotations.push({
      xref: "paper", yref: "paper", x: 0, xanchor: "right", y: domain(i)[1], yanchor: "top", align: "right",
      showarrow: false, xshift: -50,
      text: `<b>${escapeHtml(s.org)} · ${escapeHtml(s.signal)}</b><br>${escapeHtml(s.metric)}${lane.fn === "rate" ? " (rate/s)" : ""}<br>${escapeHtml(labelText(s.labels)).slice(0, 60)}`,
      font: { size: 10, color: s.colour },
    });
  });
  const eventAxis = n > 1 ? `y${n}` : "y";
  const severities = ["debug", "info", "notice", "warning", "error", "critical"];
  traces.push({
    type: "scatter", mode: "markers", yaxis: eventAxis,
    x: events.map((e) => new Date(e.ts)),
    y: events.map((e) => severities.indexOf(e.severity)),
    marker: { size: 7, color: events.map((e) => (severities.indexOf(e.severity) >= 3 ? "#d62728" : "#7f7f7f")) },
    text: events.map((e) => escapeHtml(`${e.org} · ${e.name}: ${e.message}`).slice(0, 300)),
    hovertemplate: "%{text}<extra></extra>",
  });
  layout[n > 1 ? `yaxis${n}` : "yaxis"] = {
    domain: domain(n - 1), tickvals: [0, 1, 2, 3, 4, 5], ticktext: severities, fixedrange: true, range: [-0.5, 5.5],
  };
  layout.annotations.push({
    xref: "paper", yref: "paper", x: 0, xanchor: "right", y: domain(n - 1)[1], yanchor: "top", showarrow: false,
    xshift: -70, text: "<b>events</b>", font: { size: 10 },
  });
  return { traces, layout };
}

function renderEvents(events) {
  const body = document.getElementById("event-rows");
  body.replaceChildren();
  for (const e of events.slice(-500)) {
    const row = document.createElement("tr");
    row.className = `sev-${e.severity}`;
    for (const value of [e.ts.replace("T", " ").replace("Z", ""), e.org, e.signal, e.severity, e.name, e.message]) {
      const cell = document.createElement("td");
      cell.textContent = value; // textContent: messages from other organisations are never parsed as HTML
      row.appendChild(cell);
    }
    body.appendChild(row);
  }
}

async function refresh() {
  writeUrl();
  renderPicker();
  setStatus("loading…");
  const window_ = `from=${encodeURIComponent(state.from)}&to=${encodeURIComponent(state.to)}`;
  try {
    const [lanes, events] = await Promise.all([
      state.selected.length
        ? getJson(`/api/v1/lanes?${window_}&width=${plotWidth()}&series=${state.selected.join(",")}`)
        : Promise.resolve({ lanes: [] }),
      getJson(`/api/v1/events?${window_}&limit=2000`),
    ]);
    const figure = buildFigure(lanes.lanes, events.events);
    const plot = document.getElementById("plot");
    await Plotly.react(plot, figure.traces, figure.layout, { responsive: true, displaylogo: false });
    renderEvents(events.events);
    setStatus(`${lanes.lanes.length} lanes, ${events.events.length} events`);
  } catch (error) {
    setStatus(`error: ${error.message}`);
  }
}

function onZoom(update) {
  const start = update["xaxis.range[0]"];
  const end = update["xaxis.range[1]"];
  if (start && end) {
    state.from = new Date(`${start.replace(" ", "T")}Z`).toISOString();
    state.to = new Date(`${end.replace(" ", "T")}Z`).toISOString();
    document.getElementById("from").value = state.from;
    document.getElementById("to").value = state.to;
    refresh();
  }
}

async function main() {
  readUrl();
  document.getElementById("from").value = state.from;
  document.getElementById("to").value = state.to;
  const { series } = await getJson("/api/v1/series");
  state.series = series;
  if (!state.selected.length) state.selected = series.slice(0, MAX_DEFAULT_LANES).map((s) => s.id);
  document.getElementById("apply").addEventListener("click", () => {
    state.from = document.getElementById("from").value || "now-3h";
    state.to = document.getElementById("to").value || "now";
    refresh();
  });
  for (const button of document.querySelectorAll("[data-preset]")) {
    button.addEventListener("click", () => {
      state.from = button.dataset.preset;
      state.to = "now";
      document.getElementById("from").value = state.from;
      document.getElementById("to").value = state.to;
      refresh();
    });
  }
  document.getElementById("lane-filter").addEventListener("input", renderPicker);
  await refresh();
  document.getElementById("plot").on("plotly_relayout", onZoom);
}

main();
