// Checks timeline/static/timeline/spec.js against the shared lane-spec cases (tests/timeline/lane_specs.json):
//   node lane_specs_check.mjs <spec.js> <lane_specs.json>
// Prints {"checked": n, "failures": [...]} and exits 1 when a case fails. spec.js is an ES module
// without a package.json of its own, so it is loaded from its source as a data: URL.
import { readFileSync } from "node:fs";

const [specPath, casesPath] = process.argv.slice(2);
const source = readFileSync(specPath, "utf8");
const spec = await import(`data:text/javascript;base64,${Buffer.from(source).toString("base64")}`);
const { cases } = JSON.parse(readFileSync(casesPath, "utf8"));

const failures = [];
for (const { text, canonical, error } of cases) {
  const problem = spec.specProblem(text);
  if (error) {
    if (!problem) failures.push({ text, want: "an error", got: spec.formatSpec(spec.parseSpec(text)) });
    continue;
  }
  if (problem) {
    failures.push({ text, want: canonical, got: `error: ${problem}` });
    continue;
  }
  const got = spec.formatSpec(spec.parseSpec(text));
  if (got !== canonical) failures.push({ text, want: canonical, got });
  const again = spec.specProblem(canonical) ? "error" : spec.formatSpec(spec.parseSpec(canonical));
  if (again !== canonical) failures.push({ text: canonical, want: canonical, got: again });
  // A spec assembled in another order (the lane picker's labels as typed) formats the same.
  const parsed = spec.parseSpec(canonical);
  const assembled = spec.formatSpec({ ...parsed, labels: [...parsed.labels].reverse(), flags: [...parsed.flags].reverse() });
  if (assembled !== canonical) failures.push({ text: `${canonical} (assembled)`, want: canonical, got: assembled });
}
console.log(JSON.stringify({ checked: cases.length, failures }));
process.exit(failures.length ? 1 : 0);
