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
    const [jobs, workers] = await Promise.all([getJson(`/api/jobs?${query}`), getJson("/api/workers")]);
    renderStateFilter(jobs.states);
    renderJobs(jobs.jobs, jobs.now, refresh);
    renderWorkers(workers);
    if (jobId) {
      try {
        const detail = await getJson(`/api/jobs/${encodeURIComponent(jobId)}`);
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

async function send(path) {
  const response = await fetch(`/api${path}`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: "{}",
  });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error || `${response.status}`);
  return body.message;
}

const act = (action) => pressAction(action, send, refresh);

document.addEventListener("DOMContentLoaded", () => {
  wirePage(refresh, act);
  $("state-filter").addEventListener("change", refresh);
  refresh();
});
