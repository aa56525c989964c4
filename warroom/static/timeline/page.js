// What the war room's page gives its modules: the elements by id, the organisations and the viewer
// as the server wrote them into the HTML, and the status line. It imports nothing.

export const API = "/timeline/api";
export const $ = (id) => document.getElementById(id);
export const ORGS = JSON.parse($("organizations").textContent);
export const WARROOM = JSON.parse($("warroom").textContent);
export const colours = Object.fromEntries(ORGS.map((o) => [o.slug, o.colour]));

const controls = document.querySelector(".wr-controls");
export const ROLE = controls.dataset.role || "";
export const OWN_ORG = controls.dataset.org || "";
export const CAN_WRITE = ["analyst", "admin"].includes(ROLE);

export function ownOrg(slug) {
  return slug === OWN_ORG;
}

export function setStatus(text, isError = false) {
  const status = $("status");
  status.textContent = text;
  status.classList.toggle("error", isError);
}
