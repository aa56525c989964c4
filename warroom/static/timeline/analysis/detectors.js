// The detector page: each run still queued or running is polled until it is done; its row shows the
// share of its window done and, at the end, how many detections it found and stored. Text is set with
// textContent only.
const FINISHED = new Set(["done", "failed"]);

async function poll(row) {
  const response = await fetch(row.dataset.statusUrl, { headers: { Accept: "application/json" } });
  if (!response.ok) return;
  const run = await response.json();
  row.dataset.status = run.status;
  row.querySelector("progress").value = run.done;
  row.querySelector(".done").textContent = `${Math.round(run.done * 100)} %`;
  row.querySelector(".status").textContent = run.error ? `${run.status}: ${run.error}` : run.status;
  row.querySelector(".found").textContent = String(run.found);
  row.querySelector(".written").textContent = String(run.written);
  if (!FINISHED.has(run.status)) setTimeout(() => poll(row), 1000);
}

for (const row of document.querySelectorAll("#detector-runs tr[data-run]")) {
  if (!FINISHED.has(row.dataset.status)) poll(row);
}
