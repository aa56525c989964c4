// The first view's lanes request, sent as soon as the few modules it needs are loaded and evaluated,
// not after all of the page's (timeline.js imports this module too; the page also runs it as a script
// of its own, before timeline.js, so it starts while the other modules are still on their way).
// It asks what the first view will ask: the URL's lanes, else the page's default lanes, in drawing
// order, at the plot's width. A view that waits for the catalogue (lanes named by series id, the rule
// "plus my related lanes", lanes all refused) or follows now (live) is not started early.
import { getJson, lanesUrl } from "./api.js";
import { WARROOM } from "./page.js";
import { knownFirstLanes, readUrl, session, state } from "./state.js";
import { plotWidth } from "./zoom.js";

// The answer started for ``url``, once (the first view's refresh takes it), or null: another URL, or
// none started.
export function takeFirstLanes(url) {
  const started = session.firstLanes;
  session.firstLanes = null;
  return started && started.url === url ? started.answer : null;
}

function start() {
  readUrl();
  const lanes = knownFirstLanes(WARROOM.default_lanes);
  if (!lanes || state.live) return;
  const url = lanesUrl(lanes, plotWidth());
  const answer = getJson(url);
  answer.catch(() => {}); // the first view's refresh says a failure
  session.firstLanes = { url, answer };
}

start();
