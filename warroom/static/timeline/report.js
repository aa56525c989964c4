// The static incident report: the war room's figure (figure.js) drawn from the lanes embedded in the
// file, with the same titles. The report inlines this module, figure.js, lane_kinds.js and format.js
// (their imports removed), so it opens from disk, offline. Data reaches the DOM as text only.
import { buildFigure } from "./figure.js";
import { MARGIN, readableColour } from "./format.js";
import { laneNotes, titleUnit } from "./lane_kinds.js";

function drawReport() {
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const host = document.getElementById("figure");
  const width = Math.max(600, host.clientWidth - MARGIN.l - MARGIN.r);
  const figure = buildFigure({ lanes: data.lanes, marks: data.marks, hits: [], highlight: null, window: data.window,
    colours: data.colours, width });
  figure.layout.dragmode = "zoom";
  const plot = document.createElement("div");
  host.appendChild(plot);
  const titles = document.createElement("div");
  titles.className = "titles";
  host.appendChild(titles);
  for (const row of figure.geometry.rows) {
    if (row.strip) continue;
    const lane = row.lane;
    const title = document.createElement("div");
    title.className = "title";
    title.style.top = `${MARGIN.t + row.titleTop}px`;
    title.style.left = `${MARGIN.l}px`;
    const org = document.createElement("b");
    org.textContent = lane.title.org;
    org.style.color = readableColour(lane.title.colour);
    title.append(org, document.createTextNode(` · ${lane.title.signal} · ${lane.title.what}`));
    const unit = titleUnit(lane);
    const notes = [unit, ...laneNotes(lane)].filter(Boolean);
    if (notes.length) {
      const note = document.createElement("span");
      note.className = "note";
      note.textContent = ` ${notes.join(" · ")}`;
      title.appendChild(note);
    }
    titles.appendChild(title);
  }
  window.Plotly.newPlot(plot, figure.traces, figure.layout, { displaylogo: false, responsive: true, doubleClick: "reset" })
    .then(() => { document.body.dataset.drawn = String(data.lanes.length); });
}

drawReport();
