// The incident page's findings: while the investigation runs in a worker, ask its API every few
// seconds and reload the page once the findings are kept (the page renders them, escaped).
const section = document.getElementById("investigation");

async function poll(tries) {
  if (!section || section.dataset.state !== "pending" || tries <= 0) return;
  const response = await fetch(section.dataset.api, { headers: { Accept: "application/json" } });
  const body = response.ok ? await response.json() : {};
  if (body.status === "ready") {
    window.location.reload();
    return;
  }
  setTimeout(() => poll(tries - 1), 3000);
}

poll(100);
