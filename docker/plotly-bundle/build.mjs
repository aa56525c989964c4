// Builds warroom/static/vendor/plotly-jointline/plotly-jointline.min.js: plotly.js with only the trace
// types the war room and the incident report draw (docs/decisions/0067-plotly-bundle-of-our-traces.md).
//
//   cd docker/plotly-bundle && npm ci --ignore-scripts && npm run build
//
// The bundle is made as plotly.js makes its own partial bundles (its esbuild settings: an IIFE named
// Plotly, CSS inlined, NODE_DEBUG false, the attributes' documentation stripped), from lib/core (which
// holds scatter, the layout components and the plot API) and lib/<trace> of the pinned release.
import { readFileSync, writeFileSync, mkdirSync, copyFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";
import { environmentPlugin } from "esbuild-plugin-environment";

const require = createRequire(import.meta.url);
const InlineCSSPlugin = require("esbuild-plugin-inline-css");

// What the war room and the report draw; tests/browser/test_plotly_bundle.py checks the pages use
// exactly these. scatter comes with lib/core.
export const TRACES = ["scatter", "bar", "heatmap"];

const here = dirname(fileURLToPath(import.meta.url));
const plotlyRoot = dirname(require.resolve("plotly.js/package.json"));
const version = JSON.parse(readFileSync(join(plotlyRoot, "package.json"), "utf8")).version;
const target = join(here, "..", "..", "warroom", "static", "vendor", "plotly-jointline");

// V8 compiles every function of a file that opens with this line while it streams in, off the page's
// thread (docs/decisions/0062-plotly-compiled-while-it-streams.md); it must be the file's first line.
const COMPILE_HINT = "//# allFunctionsCalledOnLoad\n";
const HEADER = `/**
* plotly.js (jointline: ${TRACES.join(", ")} - minified) v${version}
* Copyright 2012-2026, Plotly, Inc.
* All rights reserved.
* Licensed under the MIT license
*/
`;

// The attributes' documentation (description, hrName, the transforms' option lists) is only read by
// plotly's schema tools; plotly's own dist bundles leave it out the same way.
// Only whole single-quoted strings and arrays of them joined are taken out: anything else stays.
const STRING = String.raw`'(?:[^'\\\n]|\\.)*'`;
const STRINGS = String.raw`\[(?:\s*(?:${STRING}\s*,?|//[^\n]*))*\s*\]`;
const META = ["description", "hrName", "requiredOpts", "otherOpts"].flatMap((name) => [
  new RegExp(String.raw`\s*${name}: ${STRING}(?:\s*,)?(?=\s*(?:\n|\}))`, "g"),
  new RegExp(String.raw`\s*${name}: ${STRINGS}(?:\.join\(\s*${STRING}\s*\))?(?:\s*,)?(?=\s*(?:\n|\}))`, "g"),
]);
const stripAttributeMeta = {
  name: "strip-attribute-meta",
  setup(builder) {
    builder.onLoad({ filter: /[\\/]plotly\.js[\\/]src[\\/].*\.js$/ }, ({ path }) => {
      let source = readFileSync(path, "utf8");
      for (const pattern of META) source = source.replace(pattern, "");
      return { contents: source, loader: "js" };
    });
  },
};

// plotly's registry injects maplibre-gl's style sheet (83 KB of the bundle) when a map trace is
// registered: never here.
const withoutMapStyles = {
  name: "without-map-styles",
  setup(builder) {
    builder.onResolve({ filter: /^maplibre-gl\/dist\/maplibre-gl\.css$/ }, () => ({ path: "maplibre-gl.css", namespace: "empty" }));
    builder.onLoad({ filter: /.*/, namespace: "empty" }, () => ({ contents: "", loader: "js" }));
  },
};

const entry = [
  "'use strict';",
  "var Plotly = require('plotly.js/lib/core');",
  `Plotly.register([${TRACES.filter((t) => t !== "scatter").map((t) => `require('plotly.js/lib/${t}')`).join(", ")}]);`,
  "module.exports = Plotly;",
].join("\n");

const result = await build({
  stdin: { contents: entry, resolveDir: here, sourcefile: "plotly-jointline.js", loader: "js" },
  format: "iife",
  globalName: "Plotly",
  bundle: true,
  minify: true,
  sourcemap: false,
  write: false,
  plugins: [withoutMapStyles, InlineCSSPlugin(), environmentPlugin({ NODE_DEBUG: false }), stripAttributeMeta],
  alias: { stream: "stream-browserify" },
  define: { global: "window", "define.amd": "false" },
  target: "es2016",
  logLevel: "warning",
});

const bundle = COMPILE_HINT + HEADER + result.outputFiles[0].text;
mkdirSync(target, { recursive: true });
writeFileSync(join(target, "plotly-jointline.min.js"), bundle);
copyFileSync(join(plotlyRoot, "LICENSE"), join(target, "LICENSE"));
const bytes = Buffer.byteLength(bundle);
console.log(`plotly.js ${version} (${TRACES.join(", ")}): ${bytes.toLocaleString("en")} B, ${gzipSync(bundle, { level: 9 }).length.toLocaleString("en")} B gzip level 9`);
