// The war room's analysis panels: "What changed" (the scoped ranking of a window against its baseline,
// with the onsets of the top entries: which moved first) and the statistics of a stretch selected on a
// lane. Every text that comes from an organisation (names, metrics, labels, log templates,
// explanations) reaches the DOM as text nodes only. Lanes are added through the war room's own path
// (`addLane`), so the URL and the links made from the view keep them.
import { durationText, formatSpan, formatTime, formatValue, laneUnit, readableColour } from "../format.js";
import { canonicalSpec } from "../spec.js";

const CHANGES = "/api/v1/analysis/changes";
const ONSETS = "/api/v1/analysis/onsets";
const SELECTION = "/api/v1/analysis/selection";
const RANKED = 20;
const TIMED = 8;
const FIRST_SHOWN = 8;
// Query parameters the panels own (the rest of the URL is the war room's).
export const ANALYSIS_PARAMS = ["changes", "changes_from", "changes_to", "baseline_from", "baseline_to", "stretch", "stretch_from", "stretch_to"];
const SERIES_KINDS = ["line", "rate", "band", "heatmap", "sum"];
const KIND_TEXT = { group: "group", fleet: "fleet aggregate", events: "events", template: "log template", series: "series" };

const $ = (id) => document.getElementById(id);

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function isoSeconds(ms) {
  return new Date(Math.round(ms)).toISOString().replace(/\.\d+Z$/, "Z");
}

function parseTime(text) {
  const value = String(text || "").trim();
  if (!value) return null;
  const ms = Date.parse(/[zZ]|[+-]\d\d:?\d\d$/.test(value) ? value : `${value.replace(" ", "T")}Z`);
  return Number.isNaN(ms) ? null : ms;
}

// "4 min after #1", "40 s before #3": how far apart two onsets are, in words.
function apart(ms) {
  const size = Math.abs(ms);
  return size < 1000 ? durationText(size) : formatSpan(size);
}

function colourOf(value) {
  return /^#[0-9a-fA-F]{6}$/.test(value || "") ? value : "#98a2b3";
}

function labelsText(labels) {
  const items = Object.entries(labels || {}).map(([k, v]) => `${k}=${v}`);
  return items.length ? `{${items.join(", ")}}` : "";
}

/**
 * The panels, bound to the war room: ``host`` gives what they need of it.
 *   getJson(url, signal)      the war room's fetch (its audit header, its errors)
 *   addLane(spec)             adds a lane through the war room's path (URL state, permalinks)
 *   hasLane(spec)             is a lane (canonical spec) in view?
 *   showLane(spec)            brings a lane in view to the eye
 *   viewWindow()              the window the lanes show: { from_ms, to_ms } or null
 *   aligned()                 are clock corrections applied?
 *   changed()                 the panels' URL state changed (the war room rewrites its URL)
 *   redraw()                  the figure should draw the stretch and the onsets anew
 */
export function analysisPanels(host) {
  const panel = {
    open: false,
    // a chosen analysis window and baseline ({from_ms, to_ms} or null: the view's, as long just before)
    chosen: null,
    baseline: null,
    ranking: null,
    onsets: [],
    stretch: null,
    stretchLaneSpec: null,
    stretchBody: null,
  };
  let rankController = null;
  let stretchController = null;
  let rankedKey = "";

  // ---------------------------------------------------------------- URL state

  function readParams(p) {
    panel.open = p.get("changes") === "1";
    const from = parseTime(p.get("changes_from"));
    const to = parseTime(p.get("changes_to"));
    panel.chosen = from !== null && to !== null && to > from ? { from_ms: from, to_ms: to } : null;
    const bFrom = parseTime(p.get("baseline_from"));
    const bTo = parseTime(p.get("baseline_to"));
    panel.baseline = bFrom !== null && bTo !== null && bTo > bFrom ? { from_ms: bFrom, to_ms: bTo } : null;
    const spec = canonicalSpec(p.get("stretch") || "");
    const sFrom = parseTime(p.get("stretch_from"));
    const sTo = parseTime(p.get("stretch_to"));
    panel.stretch = spec && sFrom !== null && sTo !== null && sTo > sFrom ? { spec, from_ms: sFrom, to_ms: sTo } : null;
  }

  function writeParams(p) {
    for (const key of ANALYSIS_PARAMS) p.delete(key);
    for (const [key, value] of Object.entries(linkState())) p.set(key, value);
  }

  // What a permalink keeps of the panels (the page that reopens it sends them back as parameters).
  function linkState() {
    const out = {};
    if (panel.open) out.changes = "1";
    const iso = (ms) => new Date(Math.round(ms)).toISOString();
    if (panel.open && panel.chosen) {
      out.changes_from = iso(panel.chosen.from_ms);
      out.changes_to = iso(panel.chosen.to_ms);
    }
    if (panel.open && panel.baseline) {
      out.baseline_from = iso(panel.baseline.from_ms);
      out.baseline_to = iso(panel.baseline.to_ms);
    }
    if (panel.stretch) {
      out.stretch = panel.stretch.spec;
      out.stretch_from = new Date(Math.round(panel.stretch.from_ms)).toISOString();
      out.stretch_to = new Date(Math.round(panel.stretch.to_ms)).toISOString();
    }
    return out;
  }

  // ---------------------------------------------------------------- "What changed"

  function analysisWindow() {
    return panel.chosen || host.viewWindow();
  }

  function periodParams() {
    const win = analysisWindow();
    if (!win) return null;
    const q = new URLSearchParams({ from: new Date(Math.round(win.from_ms)).toISOString(), to: new Date(Math.round(win.to_ms)).toISOString() });
    if (panel.baseline) {
      q.set("baseline_from", new Date(Math.round(panel.baseline.from_ms)).toISOString());
      q.set("baseline_to", new Date(Math.round(panel.baseline.to_ms)).toISOString());
    }
    if (!host.aligned()) q.set("align", "off");
    return q;
  }

  function setOpen(open) {
    panel.open = open;
    $("changes-panel").hidden = !open;
    $("toggle-changes").setAttribute("aria-expanded", String(open));
    $("toggle-changes").classList.toggle("on", open);
    document.body.classList.toggle("wr-analysing", open || Boolean(panel.stretch));
    if (!open) {
      if (rankController) rankController.abort();
      panel.onsets = [];
      rankedKey = "";
      host.redraw();
    }
    host.changed();
    if (open) rank();
  }

  function fillForm() {
    const win = analysisWindow();
    if (win) {
      $("changes-from").value = isoSeconds(win.from_ms);
      $("changes-to").value = isoSeconds(win.to_ms);
    }
    $("changes-baseline-from").value = panel.baseline ? isoSeconds(panel.baseline.from_ms) : "";
    $("changes-baseline-to").value = panel.baseline ? isoSeconds(panel.baseline.to_ms) : "";
    $("changes-follow").hidden = !panel.chosen;
    $("changes-following").hidden = Boolean(panel.chosen);
  }

  function status(text, state) {
    const box = $("changes-status");
    box.replaceChildren(...(Array.isArray(text) ? text : [document.createTextNode(text)]));
    box.classList.toggle("error", state === "error");
    $("changes-panel").dataset.state = state;
  }

  // Rank (again) for the panel's window: the list first, then the onsets of its top entries, so a slow
  // answer shows what it has as it comes.
  async function rank({ force = false } = {}) {
    if (!panel.open) return;
    fillForm();
    const query = periodParams();
    if (!query) return;
    const key = query.toString();
    if (!force && key === rankedKey) return;
    rankedKey = key;
    if (rankController) rankController.abort();
    const controller = new AbortController();
    rankController = controller;
    const started = performance.now();
    const tick = setInterval(() => status(`Ranking every series and event family you may read… ${((performance.now() - started) / 1000).toFixed(1)} s`, "loading"), 250);
    status("Ranking every series and event family you may read…", "loading");
    $("changes-list").classList.add("stale");
    $("onsets-panel").hidden = true;
    try {
      const body = await host.getJson(`${CHANGES}?${key}&limit=${RANKED}`, controller.signal);
      if (controller.signal.aborted) return;
      panel.ranking = body;
      renderRanking();
      clearInterval(tick);
      const scored = body.scored || {};
      const counts = [[scored.series, "series"], [scored.fleet_groups, "fleet groups"], [scored.event_families, "event families"]]
        .filter(([n]) => n).map(([n, noun]) => `${n.toLocaleString("en")} ${noun}`).join(", ");
      const [from, to, bFrom, bTo] = [body.from, body.to, body.baseline_from, body.baseline_to].map(Date.parse);
      const against = bTo === from && bTo - bFrom === to - from ? `the ${formatSpan(bTo - bFrom)} before`
        : `${formatTime(bFrom)} – ${formatTime(bTo, false)}`;
      status(`${formatTime(from)} – ${formatTime(to, false)} UTC against ${against}${baselineNote(body)}: ` +
        `${counts || "nothing"} scored in ${durationText(body.server_ms)}.`, "ready");
      loadOnsets(key, controller);
    } catch (error) {
      if (error.name === "AbortError") return;
      rankedKey = "";
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

  function renderRanking() {
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
      const item = changeItem(entry, top);
      item.classList.toggle("wr-more", i >= FIRST_SHOWN);
      return item;
    });
    list.replaceChildren(...items);
    const more = $("changes-more");
    more.hidden = entries.length <= FIRST_SHOWN;
    more.textContent = list.classList.contains("wr-all") ? `show the top ${FIRST_SHOWN} only` : `show all ${entries.length}`;
  }

  function toggleMore() {
    $("changes-list").classList.toggle("wr-all");
    renderRanking();
  }

  function changeItem(entry, top) {
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
    foot.appendChild(laneButton(entry));
    if (entry.examples && entry.examples.length && entry.kind === "group") {
      const names = entry.examples.map((labels) => Object.values(labels).join("/")).slice(0, 3).join(", ");
      foot.appendChild(el("span", "wr-change-examples", `most changed: ${names}`));
    }
    item.append(head, title, why, foot);
    return item;
  }

  function laneButton(entry) {
    const spec = canonicalSpec(entry.lane);
    const button = el("button", "wr-add-lane");
    button.type = "button";
    if (!spec) {
      button.textContent = "no lane";
      button.disabled = true;
      return button;
    }
    const shown = host.hasLane(spec);
    button.textContent = shown ? "✓ in view" : "+ Add lane";
    button.classList.toggle("in-view", shown);
    button.title = shown ? `show ${spec}` : `add ${spec}`;
    button.setAttribute("aria-label", shown ? `show the lane of ${entry.title}` : `add the lane of ${entry.title}`);
    button.addEventListener("click", () => (host.hasLane(spec) ? host.showLane(spec) : host.addLane(spec)));
    return button;
  }

  // The onsets of the top entries on the corrected clock: a strip ordered by onset, each with its
  // uncertainty (half a bucket plus its organisation's clock uncertainty) drawn as a bar; onsets that
  // cannot be told apart are said to be at the same time.
  async function loadOnsets(key, controller) {
    const box = $("onsets-panel");
    box.hidden = false;
    $("onsets-strip").replaceChildren(el("li", "meta", `Timing the onsets of the top ${TIMED}…`));
    box.dataset.state = "loading";
    try {
      const body = await host.getJson(`${ONSETS}?${key}&top=${TIMED}`, controller.signal);
      if (controller.signal.aborted) return;
      panel.onsets = body.onsets;
      renderOnsets(body);
      box.dataset.state = "ready";
      host.redraw();
    } catch (error) {
      if (error.name === "AbortError") return;
      $("onsets-strip").replaceChildren(el("li", "error", `Onsets not found: ${error.message}`));
      box.dataset.state = "error";
    }
  }

  function renderOnsets(body) {
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

  // ---------------------------------------------------------------- statistics of a stretch

  const STATS = [
    ["min", "min"], ["max", "max"], ["mean", "mean"], ["p50", "median (p50)"], ["p95", "p95"], ["p99", "p99"],
    ["count", "samples"], ["above_capacity_s", "time above capacity"],
  ];

  // A stretch of a lane selected on the figure: its statistics and its baseline's, from the API.
  async function selectStretch({ spec, lane, from_ms, to_ms }) {
    panel.stretch = { spec: canonicalSpec(spec) || spec, from_ms, to_ms };
    panel.stretchLane = lane || null;
    document.body.classList.add("wr-analysing");
    host.changed();
    host.redraw();
    await loadStretch();
  }

  async function loadStretch() {
    const box = $("stretch-panel");
    const stretch = panel.stretch;
    box.hidden = !stretch;
    if (!stretch) return;
    if (stretchController) stretchController.abort();
    const controller = new AbortController();
    stretchController = controller;
    box.dataset.state = "loading";
    const lane = panel.stretchLane;
    const title = $("stretch-lane");
    title.replaceChildren();
    if (lane && lane.title) {
      const dot = el("span", "org-dot");
      dot.style.background = colourOf(lane.title.colour);
      const org = el("b", "", lane.title.org);
      org.style.color = readableColour(colourOf(lane.title.colour));
      title.append(dot, org, document.createTextNode(` · ${lane.title.signal} · ${lane.title.what}`));
    } else title.textContent = stretch.spec;
    title.title = stretch.spec;
    const length = stretch.to_ms - stretch.from_ms;
    $("stretch-when").textContent = `${formatTime(stretch.from_ms)} – ${formatTime(stretch.to_ms, false)} UTC (${formatSpan(length)}), against the ${formatSpan(length)} before`;
    $("stretch-status").textContent = "reading…";
    const q = new URLSearchParams({ lane: stretch.spec, from: new Date(Math.round(stretch.from_ms)).toISOString(), to: new Date(Math.round(stretch.to_ms)).toISOString() });
    if (!host.aligned()) q.set("align", "off");
    try {
      const body = await host.getJson(`${SELECTION}?${q}`, controller.signal);
      if (controller.signal.aborted) return;
      panel.stretchBody = body;
      renderStretch(body, lane);
      box.dataset.state = "ready";
    } catch (error) {
      if (error.name === "AbortError") return;
      $("stretch-table").tBodies[0].replaceChildren();
      $("stretch-status").textContent = `No statistics: ${error.message}`;
      box.dataset.state = "error";
    }
  }

  function renderStretch(body, lane) {
    const unit = lane && lane.title ? laneUnit(lane.title.unit, lane.fn) : "";
    const binary = Boolean(lane && lane.title && lane.title.signal === "network" && unit.startsWith("B"));
    const value = (name, v) => {
      if (v === null || v === undefined) return name === "above_capacity_s" ? "no capacity" : "–";
      if (name === "count") return Number(v).toLocaleString("en");
      if (name === "above_capacity_s") return formatSpan(v * 1000);
      return formatValue(v, unit, binary);
    };
    const rows = STATS.map(([name, text]) => {
      const row = el("tr");
      row.dataset.stat = name;
      row.appendChild(el("th", "", text)).setAttribute("scope", "row");
      for (const side of ["selection", "baseline"]) {
        const v = body[side][name];
        const cell = el("td", "", value(name, v));
        cell.dataset.side = side;
        cell.dataset.value = v === null || v === undefined ? "" : String(v);
        if (name === "above_capacity_s" && body[side].above_capacity_share !== null) {
          cell.appendChild(el("span", "wr-share", ` ${Math.round(100 * body[side].above_capacity_share)} %`));
        }
        row.appendChild(cell);
      }
      row.appendChild(el("td", "wr-delta", delta(name, body.selection[name], body.baseline[name])));
      return row;
    });
    $("stretch-table").tBodies[0].replaceChildren(...rows);
    const series = body.selection.series;
    $("stretch-status").textContent = `${series.toLocaleString("en")} series read; percentiles of ${durationText(body.step_ms)} buckets.`;
  }

  function delta(name, now, before) {
    if (typeof now !== "number" || typeof before !== "number") return "";
    if (name === "above_capacity_s") return now === before ? "" : `${now > before ? "+" : "−"}${formatSpan(Math.abs(now - before) * 1000)}`;
    if (before === 0) return now === 0 ? "=" : "new";
    const ratio = now / before;
    if (Math.abs(ratio - 1) < 0.005) return "=";
    return ratio >= 10 ? `×${Math.round(ratio)}` : `${ratio > 1 ? "+" : "−"}${Math.round(Math.abs(ratio - 1) * 100)} %`;
  }

  function clearStretch() {
    panel.stretch = null;
    panel.stretchBody = null;
    if (stretchController) stretchController.abort();
    $("stretch-panel").hidden = true;
    document.body.classList.toggle("wr-analysing", panel.open);
    host.changed();
    host.redraw();
  }

  function useStretch() {
    if (!panel.stretch) return;
    panel.chosen = { from_ms: panel.stretch.from_ms, to_ms: panel.stretch.to_ms };
    panel.baseline = null;
    if (!panel.open) setOpen(true);
    else {
      host.changed();
      rank({ force: true });
    }
    $("changes-panel").scrollIntoView({ block: "nearest" });
  }

  // ---------------------------------------------------------------- binding

  function submitForm(event) {
    event.preventDefault();
    const from = parseTime($("changes-from").value);
    const to = parseTime($("changes-to").value);
    if (from === null || to === null || !(to > from)) {
      status("The window needs a start before its end, as RFC 3339 times (2026-06-15T09:00:00Z).", "error");
      return;
    }
    const view = host.viewWindow();
    panel.chosen = view && Math.abs(view.from_ms - from) < 1000 && Math.abs(view.to_ms - to) < 1000 ? null : { from_ms: from, to_ms: to };
    const bText = [$("changes-baseline-from").value, $("changes-baseline-to").value];
    if (bText.every((t) => !t.trim())) panel.baseline = null;
    else {
      const [bFrom, bTo] = bText.map(parseTime);
      if (bFrom === null || bTo === null || !(bTo > bFrom)) {
        status("The baseline needs a start before its end, or nothing (as long as the window, just before it).", "error");
        return;
      }
      panel.baseline = { from_ms: bFrom, to_ms: bTo };
    }
    host.changed();
    rank({ force: true });
  }

  function bind() {
    $("toggle-changes").addEventListener("click", () => setOpen(!panel.open));
    $("changes-close").addEventListener("click", () => setOpen(false));
    $("changes-form").addEventListener("submit", submitForm);
    $("changes-follow").addEventListener("click", () => {
      panel.chosen = null;
      panel.baseline = null;
      host.changed();
      rank({ force: true });
    });
    $("changes-more").addEventListener("click", toggleMore);
    $("stretch-clear").addEventListener("click", clearStretch);
    $("stretch-use").addEventListener("click", useStretch);
  }

  // After the lanes are drawn: follow the view's window, redraw the add-lane buttons, open what the
  // URL asked for once.
  let started = false;
  function viewDrawn(lanes) {
    if (!started) {
      started = true;
      if (panel.open) setOpen(true);
      if (panel.stretch) {
        panel.stretchLane = lanes.find((l) => canonicalSpec(l.spec) === panel.stretch.spec) || null;
        document.body.classList.add("wr-analysing");
        loadStretch();
      }
      return;
    }
    if (panel.stretch && !panel.stretchLane) {
      panel.stretchLane = lanes.find((l) => canonicalSpec(l.spec) === panel.stretch.spec) || null;
    }
    if (!panel.open) return;
    if (!panel.chosen) rank();
    else fillForm();
    if (panel.ranking) renderRanking();
  }

  // What the figure draws of the panels: the stretch on its lane, and the onsets on the lanes in view.
  function figureMarks() {
    return {
      stretch: panel.stretch,
      onsets: panel.open ? panel.onsets.filter((o) => o.onset_ms !== null).map((o) => ({ ...o, spec: canonicalSpec(o.lane) })) : [],
    };
  }

  bind();
  return {
    panel, readParams, writeParams, linkState, viewDrawn, selectStretch, clearStretch, figureMarks,
    close: () => setOpen(false),
    isOpen: () => panel.open,
    seriesKind: (kind) => SERIES_KINDS.includes(kind),
  };
}
