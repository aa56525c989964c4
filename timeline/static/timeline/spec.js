// Lane specs in the browser: the same text form as timeline/lanes.py's LaneSpec, so the URL names lanes.
//   kind:org/signal[/what][{label=value,...}][@capacity][!flag,...]

const SPEC = /^([a-z]+):([a-z][a-z0-9-]*)\/([a-z]+)(?:\/([^{@!]+))?(?:\{([^}]*)\})?(?:@([^!]+))?(?:!([a-z0-9=_,.-]+))?$/;

export function parseSpec(text) {
  const m = SPEC.exec(String(text).trim());
  if (!m) return null;
  const labels = (m[5] || "").split(",").filter(Boolean).map((item) => item.split("=", 2));
  labels.sort((a, b) => a[0].localeCompare(b[0]));
  const flags = [...new Set((m[7] || "").split(",").filter(Boolean))].sort();
  return { kind: m[1], org: m[2], signal: m[3], what: (m[4] || "").trim(), labels, capacity: m[6] || "", flags };
}

export function formatSpec(spec) {
  let text = `${spec.kind}:${spec.org}/${spec.signal}`;
  if (spec.what) text += `/${spec.what}`;
  if (spec.labels.length) text += `{${spec.labels.map(([k, v]) => `${k}=${v}`).join(",")}}`;
  if (spec.capacity) text += `@${spec.capacity}`;
  if (spec.flags.length) text += `!${[...spec.flags].sort().join(",")}`;
  return text;
}

export function withFlag(text, flag, on) {
  const spec = parseSpec(text);
  const flags = new Set(spec.flags);
  if (on) flags.add(flag);
  else flags.delete(flag);
  spec.flags = [...flags].sort();
  return formatSpec(spec);
}

export function hasFlag(text, flag) {
  const spec = parseSpec(text);
  return Boolean(spec && spec.flags.includes(flag));
}

export function withKind(text, kind) {
  const spec = parseSpec(text);
  spec.kind = kind;
  if (!["sum", "band", "line", "rate"].includes(kind)) spec.capacity = "";
  return formatSpec(spec);
}

// Pinned lanes stay on top, in their relative order.
export function orderPinned(lanes) {
  return [...lanes.filter((l) => hasFlag(l, "pin")), ...lanes.filter((l) => !hasFlag(l, "pin"))];
}

const LANE_KINDS = ["line", "rate", "band", "heatmap", "sum", "spans", "logs"];
const SERIES_KINDS = ["line", "rate", "band", "heatmap", "sum"];
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
  if (spec.capacity && !["sum", "band", "line", "rate"].includes(spec.kind)) return "only line, rate, band and sum lanes have a capacity";
  return "";
}
