// "What changed": the scoped ranking of the panel's window (the view's, or one chosen) against its
// baseline, every entry with its explanation and a button that adds its lane; then which moved first:
// the onsets of the top entries on the corrected clock, each with its uncertainty, earliest first,
// onsets that cannot be told apart grouped as at the same time. Every function takes the panels' state
// object (analysisPanels' ``panel``).
import { durationText, formatSpan, formatTime } from "../format.js";
import { canonicalSpec } from "../spec.js";
import { $, apart, colourOf, el, isoSeconds, labelsText } from "./elements.js";

const CHANGES = "/api/v1/analysis/changes";
const RANKED = 20;
const FIRST_SHOWN = 8;
const KIND_TEXT = { group: "group", fleet: "fleet aggregate", events: "events", template: "log template", series: "series" };

export function analysisWindow(panel) {
  return panel.chosen || panel.host.viewWindow();
}

function periodParams(panel) {
  const win = analysisWindow(panel);
  if (!win) return null;
  const q = new URLSearchParams({ from: new Date(Math.round(win.from_ms)).toISOString(), to: new Date(Math.round(win.to_ms)).toISOString() });
  if (panel.baseline) {
    q.set("baseline_from", new Date(Math.round(panel.baseline.from_ms)).toISOString());
    q.set("baseline_to", new Date(Math.round(panel.baseline.to_ms)).toISOString());
  }
  if (!panel.host.aligned()) q.set("align", "off");
  return q;
}

export function setOpen(panel, open) {
  panel.open = open;
  $("changes-panel").hidden = !open;
  $("toggle-changes").setAttribute("aria-expanded", String(open));
  $("toggle-changes").classList.toggle("on", open);
  document.body.classList.toggle("wr-analysing", open || Boolean(panel.stretch));
  if (!open) {
    if (panel.rankController) panel.rankController.abort();
    panel.onsets = [];
    panel.rankedKey = "";
    panel.host.redraw();
  }
  panel.host.changed();
  if (open) rank(panel);
}

export function fillForm(panel) {
  const win = analysisWindow(panel);
  if (win) {
    $("changes-from").value = isoSeconds(win.from_ms);
    $("changes-to").value = isoSeconds(win.to_ms);
  }
  $("changes-baseline-from").value = panel.baseline ? isoSeconds(panel.baseline.from_ms) : "";
  $("changes-baseline-to").value = panel.baseline ? isoSeconds(panel.baseline.to_ms) : "";
  $("changes-follow").hidden = !panel.chosen;
  $("changes-following").hidden = Boolean(panel.chosen);
}

export function status(text, state) {
  const box = $("changes-status");
  box.replaceChildren(...(Array.isArray(text) ? text : [document.createTextNode(text)]));
  box.classList.toggle("error", state === "error");
  $("changes-panel").dataset.state = state;
}

// Rank (again) for the panel's window: the list first, then the onsets of its top entries, so a slow
// answer shows what it has as it comes.
export async function rank(panel, { force = false } = {}) {
  if (!panel.open) return;
  fillForm(panel);
  const query = periodParams(panel);
  if (!query) return;
  const key = query.toString();
  if (!force && key === panel.rankedKey) return;
  panel.rankedKey = key;
  if (panel.rankController) panel.rankController.abort();
  const controller = new AbortController();
  panel.rankController = controller;
  const started = performance.now();
  const tick = setInterval(() => status(`Ranking every series and event family you may read… ${((performance.now() - started) / 1000).toFixed(1)} s`, "loading"), 250);
  status("Ranking every series and event family you may read…", "loading");
  $("changes-list").classList.add("stale");
  $("onsets-panel").hidden = true;
  try {
    const body = await panel.host.getJson(`${CHANGES}?${key}&limit=${RANKED}`, controller.signal);
    if (controller.signal.aborted) return;
    panel.ranking = body;
    renderRanking(panel);
    clearInterval(tick);
    const scored = body.scored || {};
    const counts = [[scored.series, "series"], [scored.fleet_groups, "fleet groups"], [scored.event_families, "event families"]]
      .filter(([n]) => n).map(([n, noun]) => `${n.toLocaleString("en")} ${noun}`).join(", ");
    const [from, to, bFrom, bTo] = [body.from, body.to, body.baseline_from, body.baseline_to].map(Date.parse);
    const against = bTo === from && bTo - bFrom === to - from ? `the ${formatSpan(bTo - bFrom)} before`
      : `${formatTime(bFrom)} – ${formatTime(bTo, false)}`;
    status(`${formatTime(from)} – ${formatTime(to, false)} UTC against ${against}${baselineNote(body)}: ` +
      `${counts || "nothing"} scored in ${durationText(body.server_ms)}.`, "ready");
    loadOnsets(panel, key, controller);
  } catch (error) {
    if (error.name === "AbortError") return;
    panel.rankedKey = "";
    status(`Not ranked: ${error.message}`, "error");
  } finally {
    clearInterval(tick);
    $("changes-list").classList.remove("stale");
  }
}

// Why that baseline (the nearest with data when the stretch just before holds none), and the
// seasonal ones each entry was also compared with.
function baselineNote(body) {
  const chosen = body.baseline || {};
  const seasonal = (body.baselines || []).slice(1).map((b) => b.kind.replace("_", " "));
  const parts = [];
  if (chosen.kind === "nearest_with_data") parts.push(chosen.reason);
  if (seasonal.length) parts.push(`and the same hours ${seasonal.join(" and ")}`);
  return parts.length ? ` (${parts.join("; ")})` : "";
}

export function renderRanking(panel) {
  const list = $("changes-list");
  const entries = (panel.ranking && panel.ranking.entries) || [];
  if (!entries.length && panel.ranking && panel.ranking.data_extent) {
    // the window holds none of the viewer's data: say so, and open where it is
    const extent = panel.ranking.data_extent;
    const item = el("li", "wr-change-empty", `No data you may read in this window; yours runs from ${extent.from} to ${extent.to}. `);
    const link = el("a", "wr-change-extent", "Open that stretch");
    const where = new URLSearchParams(window.location.search);
    where.set("from", extent.from);
    where.set("to", extent.to);
    link.href = `?${where}`;
    item.appendChild(link);
    list.replaceChildren(item);
    return;
  }
  if (!entries.length) {
    list.replaceChildren(el("li", "wr-change-empty", "Nothing you may read changed between the window and its baseline."));
    return;
  }
  const top = entries[0].score || 1;
  const items = entries.map((entry, i) => {
    const item = changeItem(panel, entry, top);
    item.classList.toggle("wr-more", i >= FIRST_SHOWN);
    return item;
  });
  list.replaceChildren(...items);
  const more = $("changes-more");
  more.hidden = entries.length <= FIRST_SHOWN;
  more.textContent = list.classList.contains("wr-all") ? `show the top ${FIRST_SHOWN} only` : `show all ${entries.length}`;
}

export function toggleMore(panel) {
  $("changes-list").classList.toggle("wr-all");
  renderRanking(panel);
}

function changeItem(panel, entry, top) {
  const item = el("li", "wr-change");
  item.dataset.rank = String(entry.rank);
  item.dataset.lane = entry.lane;
  item.dataset.kind = entry.kind;
  item.dataset.signal = entry.signal;
  item.dataset.title = entry.title;
  const head = el("div", "wr-change-head");
  head.append(el("span", "wr-change-rank", entry.rank));
  const dot = el("span", "org-dot");
  dot.style.background = colourOf(entry.colour);
  // the organisation as the lanes name it (its slug), its full name on hover
  const org = el("span", "wr-change-org", entry.org);
  org.title = entry.org_name || entry.org;
  // the dot carries the organisation's colour; the name stays in the panel's text colour, whose
  // contrast holds on every background the panel takes (a tinted name fell to 4.48:1)
  head.append(dot, org, el("span", "wr-change-signal", entry.signal));
  const kind = entry.kind === "group" ? `${entry.changed} of ${entry.members} ${entry.noun || "series"}` : KIND_TEXT[entry.kind] || entry.kind;
  head.append(el("span", "wr-change-kind", kind));
  const meter = el("span", "wr-change-score");
  meter.title = `score ${entry.score.toFixed(2)}`;
  const fill = el("span");
  fill.style.width = `${Math.max(4, Math.min(100, (100 * entry.score) / top))}%`;
  meter.appendChild(fill);
  head.appendChild(meter);
  const title = el("div", "wr-change-title", entry.title);
  const labels = labelsText(entry.labels);
  if (labels) title.appendChild(el("span", "wr-change-labels", ` ${labels}`));
  const why = el("div", "wr-change-why", entry.explanation);
  for (const reason of entry.explanations || []) why.appendChild(el("div", "wr-change-dependency", reason.text));
  const foot = el("div", "wr-change-foot");
  foot.appendChild(laneButton(panel, entry));
  if (entry.examples && entry.examples.length && entry.kind === "group") {
    const names = entry.examples.map((labels) => Object.values(labels).join("/")).slice(0, 3).join(", ");
    foot.appendChild(el("span", "wr-change-examples", `most changed: ${names}`));
  }
  item.append(head, title, why, foot);
  return item;
}

function laneButton(panel, entry) {
  const spec = canonicalSpec(entry.lane);
  const button = el("button", "wr-add-lane");
  button.type = "button";
  if (!spec) {
    button.textContent = "no lane";
    button.disabled = true;
    return button;
  }
  const shown = panel.host.hasLane(spec);
  button.textContent = shown ? "✓ in view" : "+ Add lane";
  button.classList.toggle("in-view", shown);
  button.title = shown ? `show ${spec}` : `add ${spec}`;
  button.setAttribute("aria-label", shown ? `show the lane of ${entry.title}` : `add the lane of ${entry.title}`);
  button.addEventListener("click", () => (panel.host.hasLane(spec) ? panel.host.showLane(spec) : panel.host.addLane(spec)));
  return button;
}

// ---------------------------------------------------------------- which moved first

const ONSETS = "/api/v1/analysis/onsets";
const TIMED = 8;

// The onsets of the top entries on the corrected clock: a strip ordered by onset, each with its
// uncertainty (half a bucket plus its organisation's clock uncertainty) drawn as a bar; onsets that
// cannot be told apart are said to be at the same time.
async function loadOnsets(panel, key, controller) {
  const box = $("onsets-panel");
  box.hidden = false;
  $("onsets-strip").replaceChildren(el("li", "meta", `Timing the onsets of the top ${TIMED}…`));
  box.dataset.state = "loading";
  try {
    const body = await panel.host.getJson(`${ONSETS}?${key}&top=${TIMED}`, controller.signal);
    if (controller.signal.aborted) return;
    panel.onsets = body.onsets;
    renderOnsets(panel, body);
    box.dataset.state = "ready";
    panel.host.redraw();
  } catch (error) {
    if (error.name === "AbortError") return;
    $("onsets-strip").replaceChildren(el("li", "error", `Onsets not found: ${error.message}`));
    box.dataset.state = "error";
  }
}

function renderOnsets(panel, body) {
  const found = body.onsets.filter((o) => o.onset_ms !== null).sort((a, b) => a.onset_ms - b.onset_ms || a.rank - b.rank);
  const missing = body.onsets.filter((o) => o.onset_ms === null);
  const clockMax = Math.max(0, ...body.onsets.map((o) => o.clock_uncertainty_ms));
  $("onsets-note").textContent = `Earliest first, on the corrected clock (${body.method}). A bar is an onset's uncertainty: ` +
    `half a bucket plus its organisation's clock uncertainty (up to ± ${durationText(clockMax)} here); ` +
    "onsets whose bars overlap are at the same time.";
  const strip = $("onsets-strip");
  if (!found.length) {
    strip.replaceChildren(el("li", "meta", "No onset found among the top entries."));
    return;
  }
  const lo = Math.min(...found.map((o) => o.onset_ms - o.uncertainty_ms));
  const hi = Math.max(...found.map((o) => o.onset_ms + o.uncertainty_ms));
  const span = Math.max(1, hi - lo);
  const pct = (ms) => `${(100 * (ms - lo)) / span}%`;
  const first = found[0];
  const row = (onset, relation) => {
    const item = el("li", "wr-onset");
    item.dataset.rank = String(onset.rank);
    item.dataset.onsetMs = String(onset.onset_ms);
    const colour = colourOf((panel.ranking.entries.find((e) => e.rank === onset.rank) || {}).colour);
    const label = el("div", "wr-onset-label");
    label.append(el("span", "wr-change-rank", onset.rank), document.createTextNode(`${onset.org} · ${onset.title}`));
    label.title = `${onset.org} · ${onset.signal} · ${onset.title}`;
    const track = el("div", "wr-onset-track");
    const bar = el("span", "wr-onset-bar");
    bar.style.left = pct(onset.onset_ms - onset.uncertainty_ms);
    bar.style.width = `${(100 * 2 * onset.uncertainty_ms) / span}%`;
    bar.style.background = `${colour}40`;
    const tick = el("span", "wr-onset-tick");
    tick.style.left = pct(onset.onset_ms);
    tick.style.background = colour;
    track.append(bar, tick);
    const when = el("div", "wr-onset-when", `${formatTime(onset.onset_ms, false)} ± ${durationText(onset.uncertainty_ms)}`);
    if (relation) when.appendChild(el("span", "wr-onset-rel", relation));
    when.title = `bucket ± ${durationText(onset.resolution_ms / 2)}, clock ± ${durationText(onset.clock_uncertainty_ms)}`;
    item.append(label, track, when);
    return item;
  };
  const after = (onset) => (onset === first ? "first" : `${apart(onset.onset_ms - first.onset_ms)} after #${first.rank}`);
  // Onsets that cannot be told apart, one group each (same_time_as, followed through), in onset order.
  const groupOf = new Map();
  for (const onset of found) {
    if (groupOf.has(onset.rank)) continue;
    const group = [];
    const queue = [onset.rank];
    while (queue.length) {
      const rank = queue.shift();
      if (groupOf.has(rank)) continue;
      const member = found.find((o) => o.rank === rank);
      if (!member) continue;
      groupOf.set(rank, group);
      group.push(member);
      queue.push(...member.same_time_as);
    }
    group.sort((a, b) => a.onset_ms - b.onset_ms || a.rank - b.rank);
  }
  const items = [];
  const shown = new Set();
  for (const onset of found) {
    const group = groupOf.get(onset.rank);
    if (shown.has(group)) continue;
    shown.add(group);
    if (group.length === 1) {
      items.push(row(onset, after(onset)));
      continue;
    }
    const box = el("li", "wr-onset-group");
    const head = el("div", "wr-onset-group-head");
    head.append(el("b", "", `At the same time: #${group.map((o) => o.rank).join(", #")}`),
      el("span", "wr-onset-rel", `${after(group[0])} · closer together than their uncertainty`));
    const members = el("ol", "wr-onsets");
    members.append(...group.map((o) => row(o, "")));
    box.append(head, members);
    items.push(box);
  }
  for (const onset of missing) {
    const item = el("li", "wr-onset wr-onset-none");
    item.dataset.rank = String(onset.rank);
    const label = el("div", "wr-onset-label");
    label.append(el("span", "wr-change-rank", onset.rank), document.createTextNode(`${onset.org} · ${onset.title}`));
    item.append(label, el("div", "wr-onset-track"), el("div", "wr-onset-when", "no single onset"));
    items.push(item);
  }
  strip.replaceChildren(...items);
}
