// The clock corrections in force for the data in view: the chip in the toolbar, its panel (with the
// known cause-and-effect pairs shown out of order), and what a permalink recorded when it was made
// (notices.js fetches it).
import { durationText, formatTime } from "./format.js";
import { $ } from "./page.js";
import { state, view } from "./state.js";

const ORDERING_SHOWN = 6;

function correctionText(c) {
  const who = `${c.org} · ${c.source || "every agent"}${c.labels ? ` {${c.labels}}` : ""}`;
  const sign = c.offset_ms >= 0 ? "+" : "−";
  const drift = c.drift_ms_per_hour ? `, drift ${durationText(c.drift_ms_per_hour)}/h` : "";
  const unc = c.uncertainty_ms ? ` ± ${durationText(c.uncertainty_ms)}` : "";
  return `${who}: ${sign}${durationText(Math.abs(c.offset_ms))}${unc}${drift} (${c.origin}${c.method ? `, ${c.method}` : ""})`;
}

// "−2.7 s", "+46 ms": an offset as short as it reads.
function shortOffset(ms) {
  const sign = ms >= 0 ? "+" : "−";
  return Math.abs(ms) >= 1000 ? `${sign}${(Math.abs(ms) / 1000).toFixed(1)} s` : `${sign}${Math.round(Math.abs(ms))} ms`;
}

function activeCorrections(clock) {
  return ((clock && clock.corrections) || []).filter((c) => c.active !== false);
}

export function clockKey(clock) {
  if (!clock) return "";
  return `${clock.aligned !== false}|${activeCorrections(clock).map((c) => c.id).sort().join(",")}`;
}

export function describeClock(clock) {
  if (!clock || clock.aligned === false) return "corrections off";
  const active = activeCorrections(clock);
  return active.length ? active.map(correctionText).join("; ") : "no correction";
}

export function renderClock() {
  const clock = view.clock;
  const chip = $("clock-chip");
  const active = activeCorrections(clock);
  const aligned = !clock || clock.aligned !== false;
  chip.textContent = !aligned ? "clock: corrections off" : active.length
    ? `clock: ${active.length} correction${active.length > 1 ? "s" : ""} applied (${active.map((c) => `${c.org} ${shortOffset(c.offset_ms)}`).join(", ")})`
    : "clock: no corrections";
  chip.classList.toggle("on", aligned && active.length > 0);
  const list = $("clock-list");
  list.replaceChildren(...(active.length ? active : [null]).map((c) => {
    const li = document.createElement("li");
    li.textContent = c ? correctionText(c) : "No correction is in force for the data you see.";
    return li;
  }));
  if (clock && clock.ordering_violations && clock.ordering_violations.length) list.appendChild(orderingItem(clock));
  $("align").checked = state.align;
  const recorded = $("clock-recorded");
  recorded.hidden = !view.recordedClock;
  if (view.recordedClock) recorded.textContent = `The link recorded: ${describeClock(view.recordedClock)}.`;
}

// The known cause-and-effect pairs shown out of order: which clock is likely off, then each pair
// (cause → effect, with their organisations and how far the effect is shown early). Text only: names
// and organisations come from other organisations' data.
function orderingItem(clock) {
  const violations = clock.ordering_violations;
  const li = document.createElement("li");
  li.className = "error wr-ordering";
  const culprits = clock.ordering_culprits || [];
  const count = clock.ordering_count ?? violations.length;
  const head = document.createElement("p");
  head.className = "wr-ordering-head";
  head.textContent = `${count} known cause-and-effect pair${count === 1 ? " in this window appears" : "s in this window appear"} out of order`;
  if (culprits.length) {
    const [first] = culprits;
    const others = culprits.slice(1).map((c) => `${c.org} (${c.pairs})`).join(", ");
    head.textContent += `: likely ${first.org}'s clock (in ${first.pairs} of them)${others ? `; also ${others}` : ""}.`;
  }
  head.dataset.culprit = culprits.length ? culprits[0].org : "";
  const pairs = document.createElement("ul");
  pairs.className = "wr-ordering-pairs";
  for (const v of violations.slice(0, ORDERING_SHOWN)) {
    const item = document.createElement("li");
    item.dataset.rule = v.rule;
    const gap = Math.abs(v.shown_gap_ms);
    const shown = v.shown_gap_ms < 0 ? `shown ${durationText(gap)} before its cause` : `shown ${durationText(v.by_ms)} too soon after it`;
    item.textContent = `${v.earlier.org} ${v.earlier.name} → ${v.later.org} ${v.later.name}${v.node ? ` on ${v.node}` : ""} at ${formatTime(Date.parse(v.later.ts), false)}: ${shown}`;
    item.title = v.expected || v.rule;
    pairs.appendChild(item);
  }
  if (count > ORDERING_SHOWN) {
    const more = document.createElement("li");
    more.textContent = `… and ${count - ORDERING_SHOWN} more`;
    pairs.appendChild(more);
  }
  li.append(head, pairs);
  return li;
}
