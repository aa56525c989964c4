// The events of the view: the paged event table under the lanes, the search hits, the notes and
// notable events beside the lanes, and the selected event. Data never reaches the DOM as HTML: text
// nodes only.
import { noteNumbers } from "./figure.js";
import { clockNote, formatTime, labelText } from "./format.js";
import { $, ORGS } from "./page.js";
import { cycle, state, view, writeUrl } from "./state.js";
import { centreOn } from "./zoom.js";

export const EVENT_PAGE = 500;

export function findEvent(id) {
  if (!id) return null;
  const pools = [view.events, view.hits, view.marks, ...view.lanes.map((l) => l.events || []),
    ...view.lanes.map((l) => (l.segments || []).map((s) => s.event).filter(Boolean)),
    ...view.lanes.map((l) => (l.marks || []).map((m) => m.event))];
  for (const pool of pools) {
    const found = pool.find((e) => e.id === id);
    if (found) return found;
  }
  return view.selectedEvent && view.selectedEvent.id === id ? view.selectedEvent : null;
}

export function selectEvent(event, { centre }) {
  state.sel = event.id;
  view.selectedEvent = event;
  view.highlight = event;
  if (centre) {
    centreOn(event.t);
  } else {
    writeUrl();
    cycle.render();
  }
}

// Nothing selected any more (the selection's "clear", or Escape).
export function clearSelection() {
  state.sel = null;
  view.highlight = null;
  writeUrl();
  cycle.render();
}

// A click on a plotted event (a mark, a log line, a hit) selects it, without moving the window.
export function onPlotClick(data) {
  const point = data.points && data.points[0];
  if (!point) return;
  const id = point.customdata;
  if (typeof id === "number" || typeof id === "string") {
    const event = findEvent(id);
    if (event) selectEvent(event, { centre: false });
  }
}

function eventRow(e) {
  const row = document.createElement("tr");
  row.className = `sev-${e.severity}`;
  row.dataset.id = String(e.id);
  if (e.id === state.sel) row.classList.add("selected");
  const cells = [formatTime(e.t), e.org, e.signal, e.severity, e.name, labelText(e.resource), e.message ?? ""];
  cells.forEach((value, i) => {
    const cell = document.createElement("td");
    if (i === 1) {
      const dot = document.createElement("span");
      dot.className = "org-dot";
      dot.style.background = e.colour;
      cell.appendChild(dot);
    }
    cell.appendChild(document.createTextNode(value)); // never parsed as HTML
    row.appendChild(cell);
  });
  row.tabIndex = 0;
  row.setAttribute("aria-label", `${formatTime(e.t)} ${e.org} ${e.severity} ${e.name}: select and centre the view on it`);
  row.addEventListener("click", () => selectEvent(e, { centre: true }));
  row.addEventListener("keydown", (event) => {
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      selectEvent(e, { centre: true });
    }
  });
  return row;
}

// How many events the list's filters match in the whole window (the server counts them, for every
// filter). A later page in time order is asked from its cursor on: the pages before it were full, and
// the events of the cursor's millisecond they showed are counted once.
export function eventTotal(events, cursor) {
  if (typeof events.total !== "number") return null;
  if (!cursor) return events.total;
  return view.evPage * EVENT_PAGE + Math.max(0, events.total - cursor.ids.length);
}

export function renderEvents() {
  const body = $("event-rows");
  body.replaceChildren(...view.events.map(eventRow));
  const total = view.eventsTotal;
  const first = view.evPage * EVENT_PAGE;
  const shown = view.events.length ? `${first + 1}–${first + view.events.length}` : "0";
  const of = total !== null && total !== undefined ? ` of ${view.eventsTotalExact ? "" : "at least "}${total.toLocaleString("en")}` : view.eventsMore || view.evPage ? " of more" : "";
  const ranked = state.ev.order === "severity";
  $("event-count").textContent = `(${shown}${of}, ${ranked ? "most severe first" : "in time order"})`;
  $("ev-page").textContent = view.evPage || view.eventsMore ? `page ${view.evPage + 1}` : "";
  $("ev-prev").textContent = ranked ? "← more severe" : "← earlier";
  $("ev-next").textContent = ranked ? "less severe →" : "later →";
  $("ev-prev").disabled = view.evPage === 0;
  $("ev-next").disabled = !view.eventsMore;
  const order = $("ev-order");
  order.value = state.ev.order;
  if (view.orderRefused) {
    order.disabled = true;
    order.title = "this server lists events in time order only";
  }
}

function eventPage(delta) {
  if (delta > 0 && !state.ev.order) {
    const last = view.events[view.events.length - 1];
    if (!last) return;
    view.evCursors[view.evPage + 1] = { t: last.t, ids: view.events.filter((e) => e.t === last.t).map((e) => e.id) };
  }
  view.evPage = Math.max(0, view.evPage + delta);
  cycle.refresh({ reason: "events" }).then(() => $("event-rows").closest(".wr-events").scrollIntoView({ block: "nearest" }));
}

function hitItem(e) {
  const item = document.createElement("li");
  item.dataset.id = String(e.id);
  item.tabIndex = 0;
  item.addEventListener("keydown", (event) => {
    if (event.key === "Enter") selectEvent(e, { centre: true });
  });
  if (e.id === state.sel) item.classList.add("selected");
  const head = document.createElement("div");
  head.className = "wr-hit-head";
  const dot = document.createElement("span");
  dot.className = "org-dot";
  dot.style.background = e.colour;
  head.append(dot, document.createTextNode(`${formatTime(e.t, false)} ${e.org} · ${e.name}`));
  const message = document.createElement("div");
  message.className = "wr-hit-message";
  message.textContent = e.message || "";
  item.append(head, message);
  item.addEventListener("click", () => selectEvent(e, { centre: true }));
  return item;
}

export function renderHits() {
  $("hits-panel").hidden = !state.q;
  $("hits").replaceChildren(...view.hits.map(hitItem));
  $("hit-count").textContent = state.q ? `(${view.hits.length}${view.hitsMore ? "+" : ""})` : "";
}

export function renderMarks() {
  const numbers = noteNumbers(view.marks);
  $("mark-list").replaceChildren(...view.marks.map((m) => {
    const item = hitItem(m);
    if (m.annotation) {
      const number = document.createElement("span");
      number.className = "wr-note-number";
      number.textContent = String(numbers.get(m.id));
      item.querySelector(".wr-hit-head").prepend(number);
      item.classList.add("wr-annotation");
    }
    // an incident's notes are listed even when the window does not hold them: say where they are
    if (view.window && (m.t < view.window.from_ms || m.t >= view.window.to_ms)) {
      const where = document.createElement("div");
      where.className = "wr-outside";
      where.textContent = m.t < view.window.from_ms ? "before this window" : "after this window";
      item.appendChild(where);
    }
    return item;
  }));
  const legend = $("legend");
  legend.replaceChildren();
  for (const org of ORGS) {
    const chip = document.createElement("span");
    chip.className = "wr-chip";
    const dot = document.createElement("span");
    dot.className = "org-dot";
    dot.style.background = org.colour;
    chip.append(dot, document.createTextNode(org.name));
    legend.appendChild(chip);
  }
}

export function renderSelected() {
  const box = $("selected");
  const e = view.highlight;
  box.hidden = !e;
  box.replaceChildren();
  if (!e) return;
  const head = document.createElement("h2");
  head.textContent = "Selected";
  const close = document.createElement("button");
  close.type = "button";
  close.className = "link";
  close.textContent = "clear";
  close.addEventListener("click", clearSelection);
  head.appendChild(close);
  const meta = document.createElement("div");
  meta.className = "wr-hit-head";
  const dot = document.createElement("span");
  dot.className = "org-dot";
  dot.style.background = e.colour;
  meta.append(dot, document.createTextNode(`${e.org} · ${e.signal} · ${e.name} (${e.severity})`));
  const when = document.createElement("div");
  when.textContent = `${formatTime(e.t)}${e.end_t ? ` – ${formatTime(e.end_t)}` : ""}${clockNote(e)}`;
  const where = document.createElement("div");
  where.textContent = labelText(e.resource);
  const message = document.createElement("pre");
  message.className = "wr-message";
  message.textContent = e.message || "";
  box.append(head, meta, when, where, message);
  const attributes = attributeList(e.attributes);
  if (attributes) box.appendChild(attributes);
}

// An event's attributes as a definition list (a detection's families and the signals that fired,
// an XID's code, a session's outcome), as text: they come from other organisations.
function attributeList(attributes) {
  const entries = Object.entries(attributes || {}).filter(([, value]) => value !== null && value !== "");
  if (!entries.length) return null;
  const list = document.createElement("dl");
  list.className = "wr-attributes";
  for (const [key, value] of entries) {
    const term = document.createElement("dt");
    term.textContent = key;
    const detail = document.createElement("dd");
    detail.textContent = typeof value === "object" ? JSON.stringify(value) : String(value);
    list.append(term, detail);
  }
  return list;
}

// The event list's pages and filters.
export function bindEventList() {
  $("ev-prev").addEventListener("click", () => eventPage(-1));
  $("ev-next").addEventListener("click", () => eventPage(1));
  for (const key of Object.keys(state.ev)) {
    $(`ev-${key}`).addEventListener("change", () => {
      state.ev[key] = $(`ev-${key}`).value.trim();
      cycle.refresh({ reason: "filtering" });
    });
  }
}
