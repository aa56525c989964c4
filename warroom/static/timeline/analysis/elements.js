// Small pieces the analysis panels share: elements made with text only (every name in them comes from
// an organisation), times as the panels' forms read and write them, and colours checked before use.
import { durationText, formatSpan } from "../format.js";

export const $ = (id) => document.getElementById(id);

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

export function isoSeconds(ms) {
  return new Date(Math.round(ms)).toISOString().replace(/\.\d+Z$/, "Z");
}

export function parseTime(text) {
  const value = String(text || "").trim();
  if (!value) return null;
  const ms = Date.parse(/[zZ]|[+-]\d\d:?\d\d$/.test(value) ? value : `${value.replace(" ", "T")}Z`);
  return Number.isNaN(ms) ? null : ms;
}

// "4 min after #1", "40 s before #3": how far apart two onsets are, in words.
export function apart(ms) {
  const size = Math.abs(ms);
  return size < 1000 ? durationText(size) : formatSpan(size);
}

export function colourOf(value) {
  return /^#[0-9a-fA-F]{6}$/.test(value || "") ? value : "#98a2b3";
}

export function labelsText(labels) {
  const items = Object.entries(labels || {}).map(([k, v]) => `${k}=${v}`);
  return items.length ? `{${items.join(", ")}}` : "";
}
