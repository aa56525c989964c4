// How the war room asks the server: the scoped reads, each with the view it is for (for the owners'
// audit), and the writes, with Django's CSRF token.
import { API } from "./page.js";
import { state, windowParams } from "./state.js";

// What this page shows, for the owners' audit: the permalink or incident the view came through.
function viewHeader() {
  if (state.permalink) return `permalink /i/${state.permalink}${state.incident ? `, incident ${state.incident}` : ""}`;
  return state.incident ? `incident ${state.incident}` : "war room";
}

// The lanes answer of the view's window for ``lanes`` (specs) at ``width`` pixels.
export function lanesUrl(lanes, width) {
  return `${API}/lanes?${windowParams()}&width=${width}&${lanes.map((l) => `lane=${encodeURIComponent(l)}`).join("&")}`;
}

export async function getJson(url, signal) {
  const headers = { Accept: "application/json", "X-Jointline-View": viewHeader() };
  const response = await fetch(url, { credentials: "same-origin", headers, signal });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error || body.detail || `HTTP ${response.status}`);
  return body;
}

// Writes go through Django's session auth, so they carry the CSRF token (cookie, or the form's field).
function csrfToken() {
  const cookie = document.cookie.split(";").map((c) => c.trim()).find((c) => c.startsWith("csrftoken="));
  if (cookie) return decodeURIComponent(cookie.slice("csrftoken=".length));
  const field = document.querySelector("input[name=csrfmiddlewaretoken]");
  return field ? field.value : "";
}

export async function postJson(url, payload) {
  const response = await fetch(url, {
    method: "POST", credentials: "same-origin",
    headers: { Accept: "application/json", "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
    body: JSON.stringify(payload),
  });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const detail = body.error || body.detail || Object.entries(body).map(([k, v]) => `${k}: ${[].concat(v).join(" ")}`).join("; ");
    throw new Error(detail || `HTTP ${response.status}`);
  }
  return body;
}
