// Where the mouse is on the lanes: the crosshair, its time, and the value each lane shows there, in the
// readout beside its title (what each kind reads out is lane_kinds.js's table).
import { formatTime, MARGIN } from "./format.js";
import { laneReadout } from "./lane_kinds.js";
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
    if (row.readout) row.readout.textContent = laneReadout(row.lane, t);
  }
}
