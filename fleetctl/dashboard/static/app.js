// FusionFleet dashboard: polls the JSON API every 2 s and renders with DOM calls only.
// Every piece of data reaches the page as text (textContent, attribute values), never as HTML.
"use strict";

const POLL_MS = 2000;
const CANCELLABLE = new Set(["PENDING", "RUNNING"]);
const RETRYABLE = new Set(["FAILED", "CANCELLED", "TIMED_OUT", "ABORTED"]);
const SEGMENT_STATES = new Set(["pending", "running", "done", "failed"]);
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}/;

const $ = (id) => document.getElementById(id);

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined) continue;
    if (key === "className") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key === "onclick") node.addEventListener("click", value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function selectedJob() {
  return new URLSearchParams(window.location.search).get("job");
}

function selectJob(jobId) {
  const url = new URL(window.location.href);
  if (jobId) url.searchParams.set("job", jobId);
  else url.searchParams.delete("job");
  window.history.pushState({}, "", url);
  $("action-message").hidden = true;
  refresh();
}

function formatAge(seconds) {
  if (seconds === null || !Number.isFinite(seconds)) return "–";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

function secondsBetween(laterIso, earlierIso) {
  if (!laterIso || !earlierIso) return null;
  return (Date.parse(laterIso) - Date.parse(earlierIso)) / 1000;
}

function clock(epochSeconds) {
  if (epochSeconds === null || epochSeconds === undefined) return "–";
  return new Date(epochSeconds * 1000).toISOString().slice(11, 19);
}

function number(value, unit) {
  if (typeof value !== "number") return value === null || value === undefined ? "–" : String(value);
  const text = Number.isInteger(value) ? String(value) : value.toFixed(2);
  return unit ? `${text} ${unit}` : text;
}

function badge(state) {
  return el("span", { className: `badge state-${String(state).toLowerCase()}` }, state);
}

function progressBar(done, failed, total) {
  const bar = el("div", { className: "bar", title: `${done} done, ${failed} failed of ${total}` });
  const part = (cls, count) => {
    const fill = el("div", { className: cls });
    fill.style.width = total > 0 ? `${(100 * count) / total}%` : "0%";
    return fill;
  };
  bar.append(part("bar-done", done), part("bar-failed", failed));
  return bar;
}

async function getJson(path) {
  const response = await fetch(path, { cache: "no-store" });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error || `${response.status} ${response.statusText}`);
  return body;
}

function renderJobs(data) {
  const body = $("jobs").tBodies[0];
  const chosen = selectedJob();
  const rows = data.jobs.map((job) => {
    const row = el(
      "tr",
      { className: job.job_id === chosen ? "selected" : "", dataset: { jobId: job.job_id, state: job.state } },
      el("td", { className: "name", title: job.job_id }, job.name || job.job_id),
      el("td", {}, badge(job.state)),
      el("td", {}, job.priority),
      el("td", {}, progressBar(job.segments_done, job.segments_failed, job.segments_total)),
      el("td", { className: "num" }, `${job.segments_done}/${job.segments_total}`),
      el("td", { className: "num" }, formatAge(secondsBetween(data.now, job.submitted_at))),
    );
    row.addEventListener("click", () => selectJob(job.job_id));
    return row;
  });
  body.replaceChildren(...rows);
  $("jobs-empty").hidden = rows.length > 0;
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

function segmentCell(segment) {
  const state = SEGMENT_STATES.has(segment.state) ? segment.state : "pending";
  const who = segment.worker ? `${segment.worker} #${segment.attempt}` : "";
  const title =
    `segment ${segment.index} · frames ${segment.start_frame}–${segment.end_frame} · ${state}` +
    (segment.worker ? ` · ${segment.worker} · attempt ${segment.attempt}` : "");
  return el(
    "div",
    { className: `seg seg-${state}`, title, dataset: { index: segment.index, state } },
    el("b", {}, segment.index),
    el("small", {}, who),
  );
}

function renderJob(detail) {
  const summary = detail.summary;
  const section = $("job");
  section.hidden = false;
  $("no-job").hidden = true;
  const done = detail.segments.filter((s) => s.state === "done").length;
  const failed = detail.segments.filter((s) => s.state === "failed").length;
  Object.assign(section.dataset, {
    jobId: summary.job_id,
    state: summary.state,
    done: String(done),
    total: String(detail.segments.length),
  });
  $("job-name").textContent = summary.name || summary.job_id;
  $("job-state").replaceChildren(badge(summary.state));
  const meta = [summary.job_id, `priority ${summary.priority}`];
  if (summary.submitted_at) meta.push(`submitted ${formatAge(secondsBetween(detail.now, summary.submitted_at))} ago`);
  if (summary.output) meta.push(`output ${summary.output}`);
  $("job-meta").textContent = meta.join(" · ");
  $("job-reason").textContent = summary.reason || "";
  $("job-reason").hidden = !summary.reason;
  $("cancel").disabled = !CANCELLABLE.has(summary.state);
  $("retry").disabled = !RETRYABLE.has(summary.state);
  $("seg-done").textContent = String(done);
  $("seg-failed").textContent = String(failed);
  $("seg-total").textContent = String(detail.segments.length);
  $("segments").replaceChildren(...detail.segments.map(segmentCell));

  const timings = Object.entries(detail.timings || {}).flatMap(([key, value]) => {
    const seconds = key.endsWith("_s") && typeof value === "number";
    const label = (seconds ? key.slice(0, -2) : key).replace(/_/g, " ");
    let text = typeof value === "object" && value !== null ? JSON.stringify(value) : number(value, seconds ? "s" : "");
    if (typeof value === "string" && ISO_TIME.test(value)) {
      text = `${new Date(Date.parse(value)).toISOString().slice(11, 19)} UTC`;
    }
    return [el("dt", {}, label), el("dd", {}, text)];
  });
  $("timings").replaceChildren(...(timings.length ? timings : [el("dd", { className: "empty" }, "not yet")]));

  // The merge's figure once the job succeeded; before that, what its attempts have used so far.
  const cost = detail.cost;
  $("cost-title").textContent = cost && !cost.final ? "Cost so far" : "Cost";
  $("cost").replaceChildren(
    ...(cost
      ? [
          el("dt", {}, "GPU engine"), el("dd", {}, number(cost.engine_gpu_s, "s")),
          el("dt", {}, "GPU billed"), el("dd", {}, number(cost.billed_gpu_s, "s")),
          el("dt", {}, "estimate"),
          el("dd", { id: "cost-usd" }, `$${Number(cost.estimated_usd).toFixed(4)} at $${cost.gpu_hourly_price}/GPU-hour`),
        ]
      : [el("dd", { className: "empty" }, "not yet")]),
  );

  const preview = $("preview");
  if (detail.preview_url) {
    // While the job runs each poll asks for the latest frame; an ended job's frame no longer changes.
    const version = CANCELLABLE.has(summary.state) ? String(Date.now()) : summary.state;
    const src = `${detail.preview_url}?v=${version}`;
    if (preview.getAttribute("src") !== src) preview.setAttribute("src", src);
  } else {
    preview.removeAttribute("src");
    $("preview-box").hidden = true;
  }

  const rows = detail.attempts.map((a) =>
    el(
      "tr",
      { className: `attempt-${String(a.status).toLowerCase()}` },
      el("td", { className: "num" }, a.segment),
      el("td", { className: "num" }, a.attempt),
      el("td", {}, a.worker),
      el("td", {}, a.status),
      el("td", { className: "num" }, clock(a.started_at)),
      el("td", { className: "num" }, a.finished_at ? number(a.finished_at - a.started_at, "s") : "–"),
      el("td", { className: "num" }, a.engine_s === null ? "–" : number(a.engine_s, "s")),
      el("td", { className: "error" }, [a.error, a.reason].filter(Boolean).join(": ")),
    ),
  );
  $("attempts").tBodies[0].replaceChildren(...rows);
  $("attempts-empty").hidden = rows.length > 0;
}

function showConnection(ok, text) {
  const node = $("connection");
  node.dataset.ok = String(ok);
  node.textContent = text;
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
    renderJobs(jobs);
    renderWorkers(workers);
    if (jobId) {
      try {
        renderJob(await getJson(`/api/jobs/${encodeURIComponent(jobId)}`));
      } catch (error) {
        $("job").hidden = true;
        $("no-job").hidden = false;
        $("no-job").textContent = `Job ${jobId}: ${error.message}`;
      }
    } else {
      $("job").hidden = true;
      $("no-job").hidden = false;
    }
    showConnection(true, `updated ${new Date(Date.parse(jobs.now)).toISOString().slice(11, 19)} UTC`);
  } catch (error) {
    showConnection(false, `stack unreachable: ${error.message}`);
  } finally {
    timer = setTimeout(refresh, POLL_MS);
  }
}

async function act(action) {
  const jobId = selectedJob();
  if (!jobId) return;
  if (action === "cancel" && !window.confirm(`Cancel job ${jobId}?`)) return;
  const message = $("action-message");
  try {
    const response = await fetch(`/api/jobs/${encodeURIComponent(jobId)}/${action}`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: "{}",
    });
    const body = await response.json().catch(() => ({}));
    message.textContent = response.ok ? body.message : `${action} refused: ${body.error || response.status}`;
    message.dataset.ok = String(response.ok);
  } catch (error) {
    message.textContent = `${action} failed: ${error.message}`;
    message.dataset.ok = "false";
  }
  message.hidden = false;
  refresh();
}

document.addEventListener("DOMContentLoaded", () => {
  $("cancel").addEventListener("click", () => act("cancel"));
  $("retry").addEventListener("click", () => act("retry"));
  $("state-filter").addEventListener("change", refresh);
  window.addEventListener("popstate", refresh);
  // A frame that cannot be shown (none written yet, a broken file) hides the box until the next one.
  $("preview").addEventListener("error", () => ($("preview-box").hidden = true));
  $("preview").addEventListener("load", () => ($("preview-box").hidden = false));
  refresh();
});
