// The checkpoint I/O path of the window the lanes show, from the scoped API: link utilisation, RPC-slot
// saturation and duration of each checkpoint. Text nodes only: entity and organisation names come from
// other organisations. The panel follows the view: it asks again whenever the lanes are drawn anew.
import { panels, view } from "./state.js";

const API = "/api/v1/analyses/checkpoints";
const PAGE = "/analyses/checkpoints/";
const $ = (id) => document.getElementById(id);

function percent(value) {
  return value === null || value === undefined ? "–" : `${(100 * value).toFixed(1)} %`;
}

function range(pair) {
  return Array.isArray(pair) && pair.length === 2 ? `${percent(pair[0])} – ${percent(pair[1])}` : "–";
}

// The writes' own link use, else the fleet's (where the checkpoint events reach the viewer with node
// names pseudonymised, no write joins its node's link): "fleet ≤ 6.6 %".
function linkUse(checkpoint) {
  if (Array.isArray(checkpoint.link_fraction)) return range(checkpoint.link_fraction);
  const fleet = checkpoint.fleet_link_fraction;
  return Array.isArray(fleet) && fleet.length === 2 ? `fleet ≤ ${percent(fleet[1])}` : "–";
}

// An API time (RFC 3339, µs) to the second, UTC: "2026-06-15 04:43:59".
function utcSeconds(stamp) {
  return String(stamp).replace("T", " ").replace("Z", "").slice(0, 19);
}

function cell(row, value) {
  const td = document.createElement("td");
  td.textContent = value;
  row.appendChild(td);
}

function slotShare(checkpoint) {
  const shares = (checkpoint.writes || []).map((w) => w.slot_full_share).filter((s) => typeof s === "number");
  if (shares.length) return percent(shares.sort((a, b) => a - b)[Math.floor(shares.length / 2)]);
  return percent(checkpoint.fleet_slot_full_share);
}

export function render(found) {
  const rows = $("checkpoint-rows");
  rows.replaceChildren();
  const checkpoints = found.checkpoints || [];
  const summary = found.summary || {};
  $("checkpoint-panel").hidden = checkpoints.length === 0;
  $("checkpoint-count").textContent = checkpoints.length ? `(${checkpoints.length})` : "";
  const link = summary.link_fraction
    ? `storage link ${range(summary.link_fraction)} used (median ${percent(summary.link_fraction_median)})`
    : `storage link ${summary.fleet_link_fraction ? `at most ${percent(summary.fleet_link_fraction[1])} used (fleet)` : "use not readable"}`;
  $("checkpoint-summary").textContent = checkpoints.length ? `${summary.writes} writes; ${link}` : "";
  for (const checkpoint of checkpoints) {
    const row = document.createElement("tr");
    row.dataset.start = checkpoint.start;
    cell(row, utcSeconds(checkpoint.start));
    cell(row, `${Number(checkpoint.duration_s).toFixed(0)} s`);
    cell(row, String(checkpoint.entities));
    cell(row, linkUse(checkpoint));
    cell(row, slotShare(checkpoint));
    cell(row, String(checkpoint.attribution || ""));
    rows.appendChild(row);
  }
}

async function refresh() {
  const shown = view.window;
  if (!shown) return;
  const query = new URLSearchParams({
    from: new Date(Math.round(shown.from_ms)).toISOString(),
    to: new Date(Math.round(shown.to_ms)).toISOString(),
  }).toString();
  if (query === panels.checkpoints.asked) return;
  panels.checkpoints.asked = query;
  $("checkpoint-page").href = `${PAGE}?${query}`;
  const response = await fetch(`${API}?${query}`, { credentials: "same-origin" });
  if (query !== panels.checkpoints.asked) return; // the view moved on while this was asked
  if (!response.ok) {
    render({});
    return;
  }
  render(await response.json());
}

function start() {
  if (!$("checkpoint-panel")) return;
  new MutationObserver(() => refresh()).observe(document.body, { attributes: true, attributeFilter: ["data-renders"] });
  refresh();
}

start();
