// The lane picker: the lanes in view (each with its kind and toolbar) and the catalogue of what the
// viewer may add, filtered by organisation, signal, and a text that matches names, labels (key=value)
// or, for event families, the names and text of their events in the window.
import { getJson } from "./api.js";
import { capacityByDefault, EVENT_KINDS, isEventKind } from "./lane_kinds.js";
import { addLane, laneControls, replaceLane, setLanes } from "./lane_titles.js";
import { API, $, colours } from "./page.js";
import { formatSpec, hasFlag, parseSpec, withFlag, withKind } from "./spec.js";
import { capacityMetrics, session, state, view, windowParams } from "./state.js";

const FAMILY_SEARCH_MIN = 2;
const FAMILY_SEARCH_DELAY_MS = 250;

export function renderInView() {
  const list = $("lanes-in-view");
  list.replaceChildren();
  state.lanes.forEach((spec, index) => {
    const lane = view.lanes[index];
    const item = document.createElement("li");
    const label = document.createElement("span");
    label.className = "wr-in-view-label";
    label.textContent = lane ? `${lane.title.org} · ${lane.title.signal} · ${lane.title.what}` : spec;
    label.title = spec;
    const kinds = document.createElement("select");
    kinds.setAttribute("aria-label", "lane kind");
    const parsed = parseSpec(spec);
    const allowed = allowedKinds(parsed);
    for (const kind of allowed) {
      const option = document.createElement("option");
      option.value = kind;
      option.textContent = kind;
      option.selected = kind === parsed.kind;
      kinds.appendChild(option);
    }
    kinds.addEventListener("change", () => replaceLane(index, withKind(spec, kinds.value)));
    item.append(label, kinds, laneControls(spec, index, lane));
    list.appendChild(item);
  });
}

function allowedKinds(parsed) {
  if (isEventKind(parsed.kind)) return EVENT_KINDS;
  const catalogue = session.catalogue;
  const group = catalogue && catalogue.series.find((g) => g.org === parsed.org && g.metric === parsed.what);
  return group ? group.kinds : [parsed.kind];
}

export function renderCatalogue() {
  const catalogue = session.catalogue;
  if (!catalogue) return;
  const org = $("pick-org").value;
  const signal = $("pick-signal").value;
  const text = $("pick-text").value.trim();
  const labelFilter = text.includes("=") ? text.split(",").map((s) => s.trim().split("=", 2)).filter(([k, v]) => k && v !== undefined) : [];
  const needle = labelFilter.length ? "" : text.toLowerCase();
  const box = $("catalogue");
  box.replaceChildren();
  const entries = [];
  const capacities = capacityMetrics();
  const named = needle ? familiesNamed(needle) : null;
  for (const family of catalogue.events) {
    if (labelFilter.length) continue; // event lanes have no series labels to match
    // a family matches by its organisation, signal or kind, or by the name or text of its events
    const names = named && named.get(`${family.org}|${family.signal}|${family.kind}`);
    if (needle && !names && !`${family.org} ${family.signal} ${family.kind} events`.toLowerCase().includes(needle)) continue;
    const found = names ? `: ${[...names].slice(0, 4).join(", ")}${names.size > 4 ? ", …" : ""}` : "";
    entries.push({ org: family.org, signal: family.signal, text: `${family.kind} events${found} (${family.count} in window)`,
      kinds: family.with_duration ? ["spans", "logs"] : ["logs"], make: (kind) => formatSpec({ kind, org: family.org, signal: family.signal, what: "", labels: [], capacity: "", flags: [] }) });
  }
  for (const group of catalogue.series) {
    // A capacity is drawn with the lane it bounds (dashed), not as a lane of its own.
    if (capacities.has(`${group.org}/${group.metric}`)) continue;
    const haystack = `${group.org} ${group.signal} ${group.metric} ${Object.entries(group.labels).map(([k, vs]) => vs.map((v) => `${k}=${v}`).join(" ")).join(" ")}`.toLowerCase();
    if (needle && !haystack.includes(needle)) continue;
    if (labelFilter.length && !labelFilter.every(([k, v]) => (group.labels[k] || []).includes(v))) continue;
    entries.push({ org: group.org, signal: group.signal, text: `${group.metric} (${group.count})`, kinds: group.kinds,
      make: (kind) => formatSpec({ kind, org: group.org, signal: group.signal, what: group.metric,
        labels: labelFilter, capacity: capacityByDefault(kind) ? group.capacity || "" : "", flags: [] }) });
  }
  let heading = "";
  for (const entry of entries) {
    if (org && entry.org !== org) continue;
    if (signal && entry.signal !== signal) continue;
    if (needle && !`${entry.org} ${entry.signal} ${entry.text}`.toLowerCase().includes(needle) && !entry.kinds.length) continue;
    const groupName = `${entry.org} · ${entry.signal}`;
    if (groupName !== heading) {
      heading = groupName;
      const h = document.createElement("h3");
      h.textContent = groupName;
      h.style.borderLeftColor = colours[entry.org] || "#888";
      box.appendChild(h);
    }
    box.appendChild(catalogueRow(entry));
  }
}

function catalogueRow(entry) {
  const row = document.createElement("div");
  row.className = "wr-cat-row";
  const name = document.createElement("span");
  // whole names, wrapped after an underscore where they must (receive and transmit stay apart)
  entry.text.split("_").forEach((part, i) => {
    if (i) name.append("_", document.createElement("wbr"));
    name.append(part);
  });
  name.title = `${entry.org} · ${entry.signal} · ${entry.text}`;
  row.appendChild(name);
  for (const kind of entry.kinds) {
    const add = document.createElement("button");
    add.type = "button";
    add.textContent = kind;
    add.title = `add as ${kind} lane`;
    add.addEventListener("click", () => addLane(entry.make(kind)));
    row.appendChild(add);
  }
  return row;
}

// The event families whose events' names or text hold ``needle`` in the window: asked of the event
// search once per text and window (the catalogue lists families, not their event names), then the
// picker is drawn again. Null while the answer is awaited.
function familiesNamed(needle) {
  if (needle.length < FAMILY_SEARCH_MIN) return null;
  const searches = session.familySearches;
  const asking = session.familySearch;
  const key = `${windowParams()}|${needle}`;
  if (searches.has(key)) return searches.get(key);
  searches.set(key, null);
  clearTimeout(asking.timer);
  if (asking.pending) searches.delete(asking.pending); // typed on: never asked
  asking.pending = key;
  asking.timer = setTimeout(async () => {
    asking.pending = null;
    try {
      const answer = await getJson(`${API}/events?${windowParams()}&limit=200&q=${encodeURIComponent(needle)}`);
      const found = new Map();
      for (const e of answer.events || []) {
        const family = `${e.org}|${e.signal}|${e.kind}`;
        if (!found.has(family)) found.set(family, new Set());
        found.get(family).add(e.name);
      }
      searches.set(key, found);
    } catch {
      searches.delete(key);
      return;
    }
    if (!$("picker").hidden && $("pick-text").value.trim().toLowerCase() === needle) renderCatalogue();
  }, FAMILY_SEARCH_DELAY_MS);
  return null;
}

export function fillSelect(select, values) {
  for (const value of values) {
    const option = document.createElement("option");
    option.value = value;
    option.textContent = value;
    select.appendChild(option);
  }
}

// The picker's toggle, its "defaults" and its filters.
export function bindPicker() {
  $("toggle-picker").addEventListener("click", () => {
    const picker = $("picker");
    picker.hidden = !picker.hidden;
    $("toggle-picker").setAttribute("aria-expanded", String(!picker.hidden));
    renderCatalogue();
    window.dispatchEvent(new Event("resize"));
  });
  $("reset-lanes").addEventListener("click", () => {
    const pinned = state.lanes.filter((l) => hasFlag(l, "pin"));
    setLanes([...pinned, ...session.catalogue.defaults.filter((d) => !pinned.some((p) => withFlag(p, "pin", false) === d))]);
  });
  for (const id of ["pick-org", "pick-signal", "pick-text"]) $(id).addEventListener("input", renderCatalogue);
}
