// Sharing the view: a permanent link to it, an incident opened on it (with the organisations to invite),
// annotations of the incident at a time picked on the lanes, and the incident's title when the view
// came through one. timeline.js loads this module on the first use of its buttons, or for a view that
// came through an incident.
import { getJson, postJson } from "./api.js";
import { $, colours, ORGS, OWN_ORG, ownOrg, setStatus } from "./page.js";
import { parseSpec } from "./spec.js";
import { chosenLanes, cycle, session, state, view, writeUrl } from "./state.js";
import { timeAt } from "./zoom.js";

// The view's state as a permalink stores it: absolute window, lanes in order, search and filters.
function linkState() {
  const linked = { from: state.from, to: state.to, lanes: chosenLanes(), ...session.analysis.linkState() };
  if (state.mine) linked.mine = true;
  if (view.window && (state.live || state.from.startsWith("now") || state.to.startsWith("now"))) {
    linked.from = new Date(Math.round(view.window.from_ms)).toISOString();
    linked.to = new Date(Math.round(view.window.to_ms)).toISOString();
  }
  if (state.q) linked.q = state.q;
  if (state.sel) linked.sel = state.sel;
  for (const [key, value] of Object.entries(state.ev)) if (value) linked[`ev_${key}`] = value;
  return linked;
}

async function copyPermalink() {
  writeUrl();
  const button = $("copy-link");
  button.disabled = true;
  try {
    const payload = { state: linkState() };
    if (state.incident) payload.incident = state.incident;
    const link = await postJson("/api/v1/permalinks", payload);
    const url = `${window.location.origin}${link.url}`;
    const box = $("permalink");
    box.value = url;
    box.hidden = false;
    box.dataset.id = link.id;
    box.focus();
    box.select();
    try {
      await navigator.clipboard.writeText(url);
      setStatus("permanent link copied");
    } catch {
      setStatus("permanent link made: copy it from the box");
    }
  } catch (error) {
    setStatus(`link not made: ${error.message}`, true);
  } finally {
    button.disabled = false;
  }
}

// Every organisation with a lane in view is invited by default (the server adds the creator's own);
// the form lists all the others, to invite whoever is needed.
function viewOrganisations() {
  const slugs = new Set(state.lanes.map((l) => parseSpec(l)).filter(Boolean).map((s) => s.org));
  slugs.delete(OWN_ORG);
  return [...slugs].filter((slug) => slug in colours).sort();
}

function fillParticipants() {
  const box = $("incident-participants");
  const legend = box.querySelector("legend");
  const inView = new Set(viewOrganisations());
  const boxes = ORGS.filter((o) => !ownOrg(o.slug)).map((o) => {
    const label = document.createElement("label");
    const input = document.createElement("input");
    input.type = "checkbox";
    input.name = "participants";
    input.value = o.slug;
    input.checked = inView.has(o.slug);
    label.append(input, document.createTextNode(` ${o.slug}`));
    label.title = o.name;
    return label;
  });
  box.replaceChildren(legend, ...boxes);
}

function chosenParticipants() {
  return [...document.querySelectorAll("#incident-participants input:checked")].map((i) => i.value);
}

async function createIncident(title) {
  const linked = linkState();
  const incident = await postJson("/api/v1/incidents", {
    // the incident keeps every lane drawn, the opener's own included: it is the record of this view
    title, window_start: linked.from, window_end: linked.to, participants: chosenParticipants(), lanes: [...state.lanes],
  });
  state.from = linked.from;
  state.to = linked.to;
  state.live = false;
  writeUrl();
  const p = new URLSearchParams(window.location.search);
  p.delete("live");
  p.delete("permalink");
  p.set("incident", String(incident.id));
  window.location.assign(`${window.location.pathname}?${p}`);
}

export function toggleForm(formId, open) {
  $(formId).hidden = !open;
  if (formId === "annotate-form") document.body.classList.toggle("wr-annotating", open);
}

async function addAnnotation(text, when) {
  const ms = Date.parse(/[zZ]|[+-]\d\d:?\d\d$/.test(when) ? when : `${when.replace(" ", "T")}Z`);
  if (Number.isNaN(ms)) throw new Error("time: give an ISO time, e.g. 2026-06-15T10:00:00Z");
  await postJson(`/api/v1/incidents/${state.incident}/annotations`, { ts: new Date(ms).toISOString(), text });
}

export function bindIncidentControls() {
  $("copy-link").addEventListener("click", copyPermalink);
  $("create-incident").addEventListener("click", () => {
    if ($("incident-form").hidden) fillParticipants();
    toggleForm("incident-form", $("incident-form").hidden);
    if (!$("incident-form").hidden) $("incident-new-title").focus();
  });
  $("incident-cancel").addEventListener("click", () => toggleForm("incident-form", false));
  onTextSubmit("incident-form", "incident-new-title", "opening the incident…", "incident not opened", createIncident);
  $("annotate").addEventListener("click", () => {
    const open = $("annotate-form").hidden;
    toggleForm("annotate-form", open);
    if (!open) return;
    const t = view.crosshairMs ?? (view.window ? (view.window.from_ms + view.window.to_ms) / 2 : Date.now());
    $("annotate-time").value = new Date(Math.round(t)).toISOString();
    $("annotate-text").focus();
  });
  $("annotate-cancel").addEventListener("click", () => toggleForm("annotate-form", false));
  // While annotating, a click on the lanes picks the time.
  $("figure").addEventListener("click", (event) => {
    if ($("annotate-form").hidden) return;
    const t = timeAt(event.clientX);
    if (t === null) return;
    $("annotate-time").value = new Date(Math.round(t)).toISOString();
    $("annotate-text").focus();
  });
  onTextSubmit("annotate-form", "annotate-text", "annotating…", "annotation not added", async (text) => {
    await addAnnotation(text, $("annotate-time").value.trim());
    $("annotate-text").value = "";
    toggleForm("annotate-form", false);
    await cycle.refresh({ reason: "annotated" });
  });
}

// A form of one text field: on submit, unless the text is blank, say `busy` and run `action(text)`;
// a failure is said after `failed`.
function onTextSubmit(formId, inputId, busy, failed, action) {
  $(formId).addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = $(inputId).value.trim();
    if (!text) return;
    setStatus(busy);
    try {
      await action(text);
    } catch (error) {
      setStatus(`${failed}: ${error.message}`, true);
    }
  });
}

// The incident this view belongs to (from a permalink): its title, linking back to its page.
export async function showIncident(id) {
  try {
    const incident = await getJson(`/api/v1/incidents/${id}`);
    const link = $("incident-title");
    link.textContent = `Incident: ${incident.title}`;
    link.href = `/incidents/${id}/`;
    link.hidden = false;
  } catch {
    // not visible to this viewer: the view works without it
  }
}
