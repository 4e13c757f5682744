// FusionFleet operator dashboard: polls the local JSON API every 2 s; drawing is render.js's.
"use strict";

async function getJson(path) {
  const response = await fetch(path, { cache: "no-store" });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error || `${response.status} ${response.statusText}`);
  return body;
}

function renderWorkers(data) {
  const body = $("workers").tBodies[0];
  const rows = data.workers.map((worker) =>
    el(
      "tr",
      { className: worker.lost ? "lost" : "", dataset: { worker: worker.name, lost: String(worker.lost) } },
      el("td", {}, worker.name, worker.lost ? el("span", { className: "badge state-lost" }, "LOST") : null),
      el("td", {}, worker.role),
      el("td", {}, worker.engine || "–"),
      el("td", { className: "name" }, worker.current || "idle"),
      el("td", { className: "num" }, worker.segments_done),
      el("td", { className: "num" }, `${formatAge(secondsBetween(data.now, worker.last_heartbeat))} ago`),
    ),
  );
  body.replaceChildren(...rows);
  $("workers-empty").hidden = rows.length > 0;
}

function renderTenants(data) {
  const rows = data.tenants.map((t) =>
    el(
      "tr",
      { className: t.over_budget ? "over-budget" : "", dataset: { tenant: t.tenant, over: String(t.over_budget) } },
      el("td", {}, t.tenant),
      el("td", { className: "num" }, `${t.running.length}/${t.settings.max_running_jobs ?? "–"}`),
      el("td", { className: "num" }, t.waiting.length),
      el("td", { className: "num" }, `$${Number(t.spent_usd).toFixed(4)} (${t.month})`),
      el("td", { className: "num" }, t.budget_usd === null ? "none" : `$${Number(t.budget_usd).toFixed(4)}`),
    ),
  );
  $("tenants").tBodies[0].replaceChildren(...rows);
  $("tenants-empty").hidden = rows.length > 0;
}

function showDetail(detail) {
  renderJob(detail);
  // While the job runs each poll asks for the latest frame; an ended job's frame no longer changes.
  const version = detail.job.ended ? detail.job.state : String(Date.now());
  showPreview(detail.preview_url ? `${detail.preview_url}?v=${version}` : null);
}

let timer = null;

async function refresh() {
  clearTimeout(timer);
  const state = $("state-filter").value;
  const jobId = selectedJob();
  try {
    const query = new URLSearchParams({ limit: "25" });
    if (state) query.set("state", state);
    const [jobs, workers, tenants] = await Promise.all([
      getJson(`/api/jobs?${query}`), getJson("/api/workers"), getJson("/api/tenants"),
    ]);
    renderStateFilter(jobs.states);
    renderJobs(jobs.jobs, jobs.now, refresh);
    renderWorkers(workers);
    renderTenants(tenants);
    if (jobId) {
      try {
        const detail = await getJson(`/api/jobs/${encodeURIComponent(jobId)}?${itemsQuery(jobId)}`);
        showDetail(detail);
        // The detail is read after the list; its row takes that newer state, so list and job page agree.
        const rows = jobs.jobs.map((job) => (job.job_id === detail.job.job_id ? detail.job : job));
        renderJobs(rows, jobs.now, refresh);
      } catch (error) {
        showNoJob(`Job ${jobId}: ${error.message}`);
      }
    } else {
      showNoJob();
    }
    showConnection(true, `updated ${new Date(Date.parse(jobs.now)).toISOString().slice(11, 19)} UTC`);
  } catch (error) {
    showConnection(false, `stack unreachable: ${error.message}`);
  } finally {
    timer = setTimeout(refresh, POLL_MS);
  }
}

async function send(path, request = {}) {
  const response = await fetch(`/api${path}`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(request),
  });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error || `${response.status}`);
  return body.message;
}

const act = (action) => pressAction(action, send, refresh);

// A test render of the chosen job's frames, with its settings: a new job, whose page shows the pictures.
async function tryFrames(event) {
  event.preventDefault();
  const jobId = selectedJob();
  const text = $("try-frames").value;
  const frames = text.split(",").map((part) => part.trim()).filter(Boolean).map(Number);
  if (!jobId) return;
  try {
    showActionResult(true, await send(`/jobs/${encodeURIComponent(jobId)}/try`, { frames }));
  } catch (error) {
    showActionResult(false, `test render refused: ${error.message}`);
  }
  refresh();
}

document.addEventListener("DOMContentLoaded", () => {
  wirePage(refresh, act);
  $("try-form").hidden = false;
  $("try-form").addEventListener("submit", tryFrames);
  $("state-filter").addEventListener("change", refresh);
  refresh();
});
