// The lane titles laid over the figure (organisation, signal, what, unit, notes, the readout), each with
// its toolbar (per-node lines, move, pin, remove), and the changes a person makes to the lanes in view,
// from a toolbar, the picker, the notices or the analysis panels: each one refreshes the view.
import { MARGIN, readableColour } from "./format.js";
import { laneNotes, offersNodeLines, titleUnit } from "./lane_kinds.js";
import { $ } from "./page.js";
import { canonicalSpec, hasFlag, orderPinned, parseSpec, withFlag } from "./spec.js";
import { cycle, state, view } from "./state.js";

export function renderTitles() {
  const box = $("titles");
  box.replaceChildren();
  for (const row of view.geometry.rows) {
    if (row.strip) {
      const label = document.createElement("div");
      label.className = "wr-strip-label";
      label.style.top = `${MARGIN.t + row.top + 3}px`;
      label.textContent = row.strip === "marks" ? (view.marks.some((m) => m.annotation) ? "notes\n\nevents" : "events") : "hits";
      box.appendChild(label);
      continue;
    }
    const lane = row.lane;
    const title = document.createElement("div");
    title.className = "wr-title";
    title.style.top = `${MARGIN.t + row.titleTop}px`;
    title.style.left = `${MARGIN.l}px`;
    title.dataset.spec = lane.spec;
    title.dataset.index = String(row.index);
    title.style.setProperty("--org", lane.title.colour);
    const dot = document.createElement("span");
    dot.className = "org-dot";
    dot.style.background = lane.title.colour;
    const name = document.createElement("span");
    name.className = "wr-title-text";
    const org = document.createElement("b");
    org.textContent = lane.title.org;
    org.style.color = readableColour(lane.title.colour);
    if (lane.placeholder) {
      title.classList.add("wr-placeholder");
      name.append(org, document.createTextNode(` · ${lane.title.signal} · not shared with you: ${lane.placeholder.described}`));
      const ask = document.createElement("a");
      ask.className = "wr-request";
      ask.href = lane.placeholder.url;
      ask.textContent = "request access";
      title.append(dot, name, ask);
      if (lane._index !== undefined) title.appendChild(laneControls(lane.spec, row.index, lane));
      box.appendChild(title);
      continue;
    }
    name.append(org, document.createTextNode(` · ${lane.title.signal} · ${lane.title.what}`));
    const unit = titleUnit(lane);
    if (unit) {
      const unitSpan = document.createElement("span");
      unitSpan.className = "wr-unit";
      unitSpan.textContent = unit;
      name.appendChild(unitSpan);
    }
    title.append(dot, name);
    const note = laneNotes(lane).join(" · ");
    if (note) {
      const span = document.createElement("span");
      span.className = "wr-note";
      span.textContent = note;
      title.appendChild(span);
    }
    if (hasFlag(lane.spec, "pin")) title.classList.add("pinned");
    const value = document.createElement("span");
    value.className = "wr-readout";
    title.appendChild(value);
    title.appendChild(laneControls(lane.spec, row.index, lane));
    box.appendChild(title);
    row.readout = value;
  }
}

// A lane's buttons are one toolbar and one stop of the tab order (its first button, or the one last
// used); the arrow keys, Home and End move between them. Tab then goes on to the next lane and, after
// the lanes, to the event table, instead of passing every button of every lane.
export function laneControls(spec, index, lane = null) {
  const controls = document.createElement("span");
  controls.className = "wr-lane-controls";
  controls.setAttribute("role", "toolbar");
  controls.setAttribute("aria-label", `lane ${index + 1}: ${lane && lane.title ? `${lane.title.org} · ${lane.title.signal}` : spec}`);
  const button = (text, label, action) => {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = text;
    b.title = label;
    b.setAttribute("aria-label", label);
    b.tabIndex = controls.childElementCount ? -1 : 0;
    b.addEventListener("click", (event) => {
      event.stopPropagation();
      action();
    });
    controls.appendChild(b);
  };
  controls.addEventListener("keydown", onToolbarKey);
  const parsed = parseSpec(spec);
  // Per-node lines exist only where the nodes' series are shared one by one; an aggregate grant
  // shares the fleet's band only, so the control is not offered there.
  const levels = (lane && lane.group && lane.group.levels) || [];
  if (offersNodeLines(parsed.kind) && !levels.includes("aggregate")) {
    button(hasFlag(spec, "nodes") ? "−nodes" : "+nodes", "per-node lines", () => replaceLane(index, withFlag(spec, "nodes", !hasFlag(spec, "nodes"))));
  }
  button("↑", "move up", () => moveLane(index, -1));
  button("↓", "move down", () => moveLane(index, 1));
  button(hasFlag(spec, "pin") ? "unpin" : "pin", "pin on top", () => replaceLane(index, withFlag(spec, "pin", !hasFlag(spec, "pin"))));
  button("✕", "remove lane", () => removeLane(index));
  return controls;
}

function onToolbarKey(event) {
  const buttons = [...event.currentTarget.querySelectorAll("button")];
  const at = buttons.indexOf(document.activeElement);
  const to = { ArrowRight: at + 1, ArrowDown: at + 1, ArrowLeft: at - 1, ArrowUp: at - 1, Home: 0, End: buttons.length - 1 }[event.key];
  if (to === undefined || at < 0) return;
  event.preventDefault();
  event.stopPropagation();
  const next = buttons[(to + buttons.length) % buttons.length];
  for (const b of buttons) b.tabIndex = b === next ? 0 : -1;
  next.focus();
}

export function setLanes(lanes) {
  state.lanes = orderPinned(lanes);
  cycle.refresh({ reason: "lanes changed" });
}

function moveLane(index, delta) {
  const lanes = [...state.lanes];
  const target = index + delta;
  if (target < 0 || target >= lanes.length) return;
  [lanes[index], lanes[target]] = [lanes[target], lanes[index]];
  setLanes(lanes);
}

export function replaceLane(index, spec) {
  const lanes = [...state.lanes];
  lanes[index] = spec;
  setLanes(lanes);
}

function removeLane(index) {
  setLanes(state.lanes.filter((_, i) => i !== index));
}

export function addLane(spec) {
  const canonical = canonicalSpec(spec) || spec;
  if (!hasLane(canonical)) setLanes([...state.lanes, canonical]);
}

export function hasLane(spec) {
  const canonical = canonicalSpec(spec) || spec;
  return state.lanes.some((lane) => (canonicalSpec(lane) || lane) === canonical);
}

// Bring a lane in view to the eye: scroll to its title and flash it.
export function showLane(spec) {
  const canonical = canonicalSpec(spec) || spec;
  const title = [...document.querySelectorAll(".wr-title")].find((t) => (canonicalSpec(t.dataset.spec) || t.dataset.spec) === canonical);
  if (!title) return;
  title.scrollIntoView({ block: "center", behavior: "smooth" });
  title.classList.remove("wr-flash");
  void title.offsetWidth;
  title.classList.add("wr-flash");
}
