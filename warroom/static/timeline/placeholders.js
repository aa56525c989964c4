// What is not shared with the viewer, said where it would be: a placeholder lane in place of a lane
// that reads nothing of another organisation, the permalink's placeholders where its lanes were, and
// the summary under the lanes, each with a link to ask the owner for access.
import { formatTime } from "./format.js";
import { isEventKind } from "./lane_kinds.js";
import { $, colours, ORGS, ownOrg, WARROOM } from "./page.js";
import { parseSpec } from "./spec.js";
import { state, view } from "./state.js";

function unsharedOf(org, signal) {
  return (WARROOM.unshared || []).find((u) => u.org === org && u.signal === signal) || null;
}

function eventsShared(org, signal) {
  if (ownOrg(org)) return true;
  const entry = (WARROOM.event_sharing || []).find((e) => e.org === org);
  return Boolean(entry && (entry.signals.includes("*") || entry.signals.includes(signal)));
}

// The "request access" link of a placeholder: the sharing page's form, open and filled in with what
// the viewer may see (owner, signal, a published description's id), never a name the owner keeps.
function requestUrl(org, signal, family = null) {
  const p = new URLSearchParams({ owner: org, signals: signal });
  if (family) p.set("family", String(family.id));
  const window = view.window ? `${formatTime(view.window.from_ms)} – ${formatTime(view.window.to_ms)} UTC` : "";
  const what = family ? family.name : `${signal} data`;
  p.set("reason", `War room ${window}: we need ${what} of ${org} to see the incident on one timeline.`);
  return `/sharing/?${p}#request-access`;
}

// What a placeholder says, as its owner lets it: how many series (or only that data exists), then the
// descriptions the owner published.
function familyText(family) {
  return `${family.name}${family.text ? `: ${family.text}` : ""}${family.count ? ` (${family.count} series)` : ""}`;
}

// A placeholder lane: drawn where the lane is, with what exists (as the owner announces it) and a way
// to ask for it.
function placeholderLane({ org, signal, spec = "", kind = "", what = "", index = undefined }) {
  // Series placeholders describe series lanes; an event lane stands for the organisation's events.
  const events = isEventKind(kind);
  const unshared = events ? null : unsharedOf(org, signal);
  const families = unshared ? unshared.families : [];
  const metric = (parseSpec(spec) || {}).what || what;
  const org_ = ORGS.find((o) => o.slug === org);
  const described = events ? `${signal} events and logs`
    : unshared ? [unshared.what, ...families.map(familyText)].join("; ") : metric || `${signal} data`;
  return {
    status: "unshared", kind: kind || "placeholder", spec, _index: index, points: 0,
    title: { org, org_name: org_ ? org_.name : org, colour: colours[org] || "#98a2b3", signal, what: described, unit: "" },
    placeholder: { org, signal, families, described, url: requestUrl(org, signal) },
  };
}

// The lanes as drawn: the server's lanes (in the order of state.lanes), a lane of another organisation
// that reads nothing because nothing of it is shared turned into a placeholder, and the permalink's
// placeholders inserted where its lanes were.
export function displayLanes() {
  const drawn = view.lanes.map((lane, index) => {
    const spec = parseSpec(lane.spec) || {};
    const notShared = spec.org && !ownOrg(spec.org) && (
      (lane.status === "unavailable" && /no series you may read/.test(lane.note || "")) ||
      (isEventKind(lane.kind) && !eventsShared(spec.org, spec.signal)));
    if (notShared) return placeholderLane({ org: spec.org, signal: spec.signal, spec: lane.spec, kind: lane.kind, index });
    return Object.assign(lane, { _index: index });
  });
  const linked = [...state.unsharedLanes].sort((a, b) => (a.at ?? Infinity) - (b.at ?? Infinity));
  for (const item of linked) {
    const at = item.at === null ? drawn.length : Math.min(item.at, drawn.length);
    drawn.splice(at, 0, placeholderLane({ org: item.org, signal: item.signal, kind: item.kind }));
  }
  return drawn;
}

// The summary under the lanes: per owner and signal, what is not shared with the viewer as the owner
// lets it be said, each with its request link.
export function renderUnshared() {
  const box = $("unshared");
  const unshared = WARROOM.unshared || [];
  box.hidden = !unshared.length;
  box.replaceChildren();
  if (box.hidden) return;
  for (const item of unshared) {
    const span = document.createElement("span");
    const dot = document.createElement("span");
    dot.className = "org-dot";
    dot.style.background = item.colour || "#98a2b3";
    const link = document.createElement("a");
    link.href = requestUrl(item.org, item.signal);
    link.textContent = "request access";
    span.append(dot, document.createTextNode(`${item.org} · ${item.signal}: ${item.text} — `), link);
    for (const family of item.families) {
      const ask = document.createElement("a");
      ask.href = requestUrl(item.org, item.signal, family);
      ask.textContent = "request access";
      span.append(document.createTextNode(`; ${familyText(family)} — `), ask);
    }
    box.appendChild(span);
  }
}
