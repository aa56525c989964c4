// The war room's analysis panels: "What changed" (the scoped ranking of a window against its baseline,
// with the onsets of the top entries: which moved first; ranking.js) and the statistics of a stretch
// selected on a lane (stretch.js). Every text that comes from an organisation (names, metrics,
// labels, log templates, explanations) reaches the DOM as text nodes only. Lanes are added through the
// war room's own path (`addLane`), so the URL and the links made from the view keep them.
//
// The panels' state is one object (`panel` below), made once per page and handed to every function of
// the modules above; the war room's own state is in ../state.js.
import { canonicalSpec } from "../spec.js";
import { ANALYSIS_PARAMS } from "../state.js";
import { $, parseTime } from "./elements.js";
import { fillForm, rank, renderRanking, setOpen, status, toggleMore } from "./ranking.js";
import { clearStretch, loadStretch, selectStretch } from "./stretch.js";

const SERIES_KINDS = ["line", "rate", "band", "heatmap", "sum"];

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
    host,
    open: false,
    // a chosen analysis window and baseline ({from_ms, to_ms} or null: the view's, as long just before)
    chosen: null,
    baseline: null,
    ranking: null,
    rankedKey: "",
    rankController: null,
    onsets: [],
    stretch: null,
    stretchLane: null,
    stretchBody: null,
    stretchController: null,
    started: false, // the lanes were drawn once: what the URL asked for is open
  };

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

  // ---------------------------------------------------------------- binding

  // The stretch's window becomes the window "What changed" ranks.
  function useStretch() {
    if (!panel.stretch) return;
    panel.chosen = { from_ms: panel.stretch.from_ms, to_ms: panel.stretch.to_ms };
    panel.baseline = null;
    if (!panel.open) setOpen(panel, true);
    else {
      host.changed();
      rank(panel, { force: true });
    }
    $("changes-panel").scrollIntoView({ block: "nearest" });
  }

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
    rank(panel, { force: true });
  }

  function bind() {
    $("toggle-changes").addEventListener("click", () => setOpen(panel, !panel.open));
    $("changes-close").addEventListener("click", () => setOpen(panel, false));
    $("changes-form").addEventListener("submit", submitForm);
    $("changes-follow").addEventListener("click", () => {
      panel.chosen = null;
      panel.baseline = null;
      host.changed();
      rank(panel, { force: true });
    });
    $("changes-more").addEventListener("click", () => toggleMore(panel));
    $("stretch-clear").addEventListener("click", () => clearStretch(panel));
    $("stretch-use").addEventListener("click", useStretch);
  }

  // After the lanes are drawn: follow the view's window, redraw the add-lane buttons, open what the
  // URL asked for once.
  function viewDrawn(lanes) {
    if (!panel.started) {
      panel.started = true;
      if (panel.open) setOpen(panel, true);
      if (panel.stretch) {
        panel.stretchLane = lanes.find((l) => canonicalSpec(l.spec) === panel.stretch.spec) || null;
        document.body.classList.add("wr-analysing");
        loadStretch(panel);
      }
      return;
    }
    if (panel.stretch && !panel.stretchLane) {
      panel.stretchLane = lanes.find((l) => canonicalSpec(l.spec) === panel.stretch.spec) || null;
    }
    if (!panel.open) return;
    if (!panel.chosen) rank(panel);
    else fillForm(panel);
    if (panel.ranking) renderRanking(panel);
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
    panel, readParams, writeParams, linkState, viewDrawn, figureMarks,
    selectStretch: (stretch) => selectStretch(panel, stretch),
    clearStretch: () => clearStretch(panel),
    close: () => setOpen(panel, false),
    isOpen: () => panel.open,
    seriesKind: (kind) => SERIES_KINDS.includes(kind),
  };
}
