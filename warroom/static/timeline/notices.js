// The notices above the lanes (lanes of a link that could not be read, the viewer's own related lanes,
// an empty window, a link made under other clock corrections), and the rule "plus my related lanes"
// they offer.
import { getJson } from "./api.js";
import { clockKey, describeClock, renderClock } from "./clock.js";
import { formatTime } from "./format.js";
import { capacityByDefault, laneEmpty } from "./lane_kinds.js";
import { addLane } from "./lane_titles.js";
import { $, ownOrg, WARROOM } from "./page.js";
import { formatSpec, orderPinned, parseSpec } from "./spec.js";
import { capacityMetrics, chosenLanes, cycle, session, state, view } from "./state.js";

function notice(key, parts, { dismiss = true } = {}) {
  const box = document.createElement("div");
  box.className = "wr-notice";
  box.dataset.notice = key;
  for (const part of parts) box.append(typeof part === "string" ? document.createTextNode(part) : part);
  if (dismiss) {
    const close = document.createElement("button");
    close.type = "button";
    close.className = "link";
    close.textContent = "dismiss";
    close.setAttribute("aria-label", "dismiss this notice");
    close.addEventListener("click", () => {
      view.dismissed.add(key);
      renderNotices();
    });
    box.appendChild(close);
  }
  return box;
}

function actionButton(text, action) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = text;
  b.addEventListener("click", action);
  return b;
}

function link(text, href) {
  const a = document.createElement("a");
  a.href = href;
  a.textContent = text;
  return a;
}

// Lanes of the viewer's own data for the signals of a link it opened, that the link does not show:
// what the opener adds to a colleague's view (his per-node latency beside her lanes).
function relatedOwnLanes({ always = false } = {}) {
  const catalogue = session.catalogue;
  if (!(always || state.permalink || state.incident) || !catalogue) return [];
  const inView = chosenLanes().map(parseSpec).filter(Boolean);
  const signals = new Set(inView.map((spec) => spec.signal));
  const shown = new Set(inView.filter((spec) => ownOrg(spec.org)).map((spec) => spec.what));
  const capacities = capacityMetrics();
  return catalogue.series
    .filter((g) => ownOrg(g.org) && signals.has(g.signal) && !shown.has(g.metric) && !capacities.has(`${g.org}/${g.metric}`))
    .map((g) => {
      const kind = g.kinds.includes("band") && g.count > 1 ? "band" : g.kinds.includes("heatmap") ? "heatmap" : g.kinds[0];
      return { group: g, spec: formatSpec({ kind, org: g.org, signal: g.signal, what: g.metric, labels: [], capacity: capacityByDefault(kind) ? g.capacity || "" : "", flags: [] }) };
    })
    .filter((item) => item.spec && !state.lanes.includes(item.spec))
    .slice(0, 8);
}

// Apply the rule: add this viewer's own lanes for the signals of the chosen lanes (again after a reload,
// and for whoever opens a link made from the view).
export function applyMineRule() {
  state.ruleLanes = state.ruleLanes.filter((lane) => state.lanes.includes(lane));
  if (!state.mine) return;
  const added = relatedOwnLanes({ always: true }).map((r) => r.spec);
  state.ruleLanes = [...state.ruleLanes, ...added];
  state.lanes = orderPinned([...state.lanes, ...added]);
}

function setMine(on) {
  state.mine = on;
  if (on) applyMineRule();
  else {
    state.lanes = chosenLanes();
    state.ruleLanes = [];
  }
  cycle.refresh({ reason: on ? "adding your lanes" : "lanes changed" });
}

export function renderNotices() {
  const box = $("notices");
  const items = [];
  if (state.rejected.length && !view.dismissed.has("rejected")) {
    const list = document.createElement("ul");
    for (const { text, why } of state.rejected) {
      const li = document.createElement("li");
      const code = document.createElement("code");
      code.textContent = text;
      li.append(code, document.createTextNode(`: ${why}`));
      list.appendChild(li);
    }
    items.push(notice("rejected", [`${state.rejected.length === 1 ? "A lane" : `${state.rejected.length} lanes`} of the link could not be read and ${state.rejected.length === 1 ? "is" : "are"} not shown:`, list]));
  }
  const related = state.mine ? [] : relatedOwnLanes();
  if (related.length && !view.dismissed.has("related")) {
    const parts = [`Your own lanes for the signals of this ${state.permalink ? "link" : "incident"}: `];
    related.forEach((item, i) => {
      if (i) parts.push(", ");
      const b = actionButton(`${item.group.metric} (${parseSpec(item.spec).kind})`, () => addLane(item.spec));
      b.className = "link";
      b.title = `add ${item.spec}`;
      parts.push(b);
    });
    const all = actionButton(`Add ${related.length === 1 ? "it" : `all ${related.length}`}`, () => setMine(true));
    all.title = "add them, and let links you copy from this view bring each opener's own lanes too";
    parts.push(" ", all, " (links you copy then add each opener's own lanes too) ");
    items.push(notice("related", parts));
  }
  const ruled = state.ruleLanes.filter((lane) => state.lanes.includes(lane));
  if (state.mine && !view.dismissed.has("mine")) {
    const parts = [ruled.length
      ? `Plus your own lanes for the signals of this view (${ruled.length} added). `
      : "Plus your own lanes for the signals of this view (none of yours match). ",
    "Links you copy from it add each opener's own lanes too. "];
    const stop = actionButton(ruled.length ? "remove them" : "stop adding them", () => setMine(false));
    stop.className = "link";
    parts.push(stop);
    items.push(notice("mine", parts));
  }
  if (view.lanes.length && view.drawn.every((lane) => lane.placeholder || laneEmpty(lane)) && !view.events.length) {
    items.push(notice("empty", emptyWindowParts(), { dismiss: false }));
  }
  if (view.recordedClock && !view.dismissed.has("clock")) {
    const now = clockKey(view.clock);
    const then = clockKey(view.recordedClock);
    if (now !== then) {
      items.push(notice("clock", [`This link was made with ${describeClock(view.recordedClock)}; the times shown use the corrections in force now: ${describeClock(view.clock)}. `, link("clock page", "/clock/")]));
    }
  }
  box.replaceChildren(...items);
}

// "No data in this window", with where the viewer's latest data is and the open incidents.
function emptyWindowParts() {
  const parts = ["No data in this window. "];
  const latest = WARROOM.latest_ms;
  if (latest && view.window && (latest < view.window.from_ms || latest > view.window.to_ms)) {
    const from = new Date(latest - 3 * 3600e3).toISOString();
    const to = new Date(latest + 60e3).toISOString();
    parts.push(`The latest data you may read is at ${formatTime(latest)} UTC: `,
      link("show the 3 hours up to it", `${window.location.pathname}?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`), ". ");
  }
  const incidents = WARROOM.incidents || [];
  if (incidents.length) {
    parts.push("Open incidents: ");
    incidents.forEach((incident, i) => {
      if (i) parts.push(", ");
      const p = new URLSearchParams({ from: incident.from, to: incident.to || new Date().toISOString(), incident: String(incident.id) });
      parts.push(link(`${incident.title} (${incident.status})`, `${window.location.pathname}?${p}`));
    });
    parts.push(".");
  }
  return parts;
}

// The clock a permalink recorded when it was made, to say when the corrections in force differ.
export async function recordedClock(id) {
  try {
    const link = await getJson(`/api/v1/permalinks/${encodeURIComponent(id)}`);
    view.recordedClock = link.state && link.state.clock ? link.state.clock : null;
    if (view.geometry) {
      renderNotices();
      renderClock();
    }
  } catch {
    view.recordedClock = null;
  }
}
