// Lane specs in the browser: the same grammar and canonical text as timeline/lanes/spec.py's LaneSpec,
// so the URL names lanes and one lane is never added twice under two spellings.
//   kind:org/signal[/what][{label=value,...}][@capacity][!flag,...]
// Canonical text: spaces trimmed around the whole text, the metric, each label name and value and the
// capacity; labels sorted by name, then value, in code-point order; flags without repeats, sorted.
// tests/timeline/lane_specs.json holds the cases both sides are checked against.

const SPEC = /^([a-z]+):([a-z][a-z0-9-]*)\/([a-z]+)(?:\/([^{}@!]+))?(?:\{([^}]*)\})?(?:@([^{}@!]+))?(?:!([a-z0-9=_,.-]+))?$/;

// Code-point order, as Python compares strings (localeCompare would follow the reader's locale).
function compareText(a, b) {
  const x = Array.from(a, (c) => c.codePointAt(0));
  const y = Array.from(b, (c) => c.codePointAt(0));
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
}

function compareLabels([k1, v1], [k2, v2]) {
  return compareText(k1, k2) || compareText(v1 ?? "", v2 ?? "");
}

function parseLabel(item) {
  const at = item.indexOf("=");
  return at < 0 ? [item.trim(), undefined] : [item.slice(0, at).trim(), item.slice(at + 1).trim()];
}

export function parseSpec(text) {
  const m = SPEC.exec(String(text).trim());
  if (!m) return null;
  const labels = (m[5] || "").split(",").filter(Boolean).map(parseLabel);
  labels.sort(compareLabels);
  const flags = [...new Set((m[7] || "").split(",").filter(Boolean))].sort(compareText);
  return {
    kind: m[1],
    org: m[2],
    signal: m[3],
    what: (m[4] || "").trim(),
    labels,
    capacity: (m[6] || "").trim(),
    flags,
  };
}

// The canonical text of a parsed (or assembled) spec: labels and flags in canonical order whatever
// order they were given in, so a lane picked twice is the same text twice.
export function formatSpec(spec) {
  const what = String(spec.what || "").trim();
  const capacity = String(spec.capacity || "").trim();
  const labels = (spec.labels || []).map(([k, v]) => [String(k).trim(), String(v ?? "").trim()]).sort(compareLabels);
  const flags = [...new Set(spec.flags || [])].sort(compareText);
  let text = `${spec.kind}:${spec.org}/${spec.signal}`;
  if (what) text += `/${what}`;
  if (labels.length) text += `{${labels.map(([k, v]) => `${k}=${v}`).join(",")}}`;
  if (capacity) text += `@${capacity}`;
  if (flags.length) text += `!${flags.join(",")}`;
  return text;
}

// The canonical text of a spec's text, or null when it is not understood (see specProblem).
export function canonicalSpec(text) {
  return specProblem(text) ? null : formatSpec(parseSpec(text));
}

export function withFlag(text, flag, on) {
  const spec = parseSpec(text);
  const flags = new Set(spec.flags);
  if (on) flags.add(flag);
  else flags.delete(flag);
  spec.flags = [...flags].sort(compareText);
  return formatSpec(spec);
}

export function hasFlag(text, flag) {
  const spec = parseSpec(text);
  return Boolean(spec && spec.flags.includes(flag));
}

export function withKind(text, kind) {
  const spec = parseSpec(text);
  spec.kind = kind;
  if (!CAPACITY_KINDS.includes(kind)) spec.capacity = "";
  return formatSpec(spec);
}

// Pinned lanes stay on top, in their relative order.
export function orderPinned(lanes) {
  return [...lanes.filter((l) => hasFlag(l, "pin")), ...lanes.filter((l) => !hasFlag(l, "pin"))];
}

const LANE_KINDS = ["line", "rate", "band", "heatmap", "sum", "spans", "logs"];
const CAPACITY_KINDS = ["sum", "band", "line", "rate"];
export const SERIES_KINDS = ["line", "rate", "band", "heatmap", "sum"];
const FLAGS = ["pin", "nodes", "pct"];

// Why a lane spec is not understood (the same rules as LaneSpec.parse on the server), or "" if it is.
export function specProblem(text) {
  const t = String(text).trim();
  if (!t) return "it is empty";
  const kind = /^([a-z]+):/.exec(t);
  if (!kind) return `it does not start with a lane kind (${LANE_KINDS.join(", ")}) and a colon`;
  if (!LANE_KINDS.includes(kind[1])) return `"${kind[1]}" is not a lane kind: one of ${LANE_KINDS.join(", ")}`;
  if (!/^[a-z]+:[a-z][a-z0-9-]*\/[a-z]+/.test(t)) return "after the kind comes organisation/signal, e.g. storage/storage";
  if ((t.match(/\{/g) || []).length !== (t.match(/\}/g) || []).length) return "its labels' braces { } do not match";
  const spec = parseSpec(t);
  if (!spec) return "it is not kind:org/signal[/what][{labels}][@capacity][!flags]";
  if (SERIES_KINDS.includes(spec.kind) && !spec.what) return `a ${spec.kind} lane names a metric: ${spec.kind}:org/signal/metric`;
  const label = spec.labels.find(([k, v]) => !k || v === undefined);
  if (label) return `label "${label.join("=")}" is not name=value`;
  const flag = spec.flags.find((f) => !FLAGS.includes(f) && !f.startsWith("by="));
  if (flag) return `unknown flag "${flag}" (flags: ${FLAGS.join(", ")}, by=<label>)`;
  if (spec.capacity && !CAPACITY_KINDS.includes(spec.kind)) return "only line, rate, band and sum lanes have a capacity";
  return "";
}
