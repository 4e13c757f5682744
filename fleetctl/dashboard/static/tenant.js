// FusionFleet tenant page: a static page that calls the tenant HTTP API with the tenant's own token.
// The token arrives in the URL fragment (#token=…, never sent to a server, removed from the address
// bar at once) or is pasted; it is kept in this tab's sessionStorage only. config.json, published
// beside the page, names the API; a page without one (the local stack) takes #api=… as well.
"use strict";

const TOKEN_KEY = "fusionfleet.token";
const API_KEY = "fusionfleet.api";
const session = window.sessionStorage;
let config = {};
let timer = null;
let previewFor = null; // the job whose preview is shown, and whether it may still change

function apiBase() {
  return String(config.api_url || session.getItem(API_KEY) || "").replace(/\/+$/, "");
}

function token() {
  return session.getItem(TOKEN_KEY) || "";
}

// The token's claims, for showing who is signed in and until when; the API verifies it, not this.
function claims(jwt) {
  try {
    const part = jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(part + "=".repeat((4 - (part.length % 4)) % 4)));
  } catch {
    return {};
  }
}

function takeFragment() {
  const values = new URLSearchParams(window.location.hash.slice(1));
  if (values.get("token")) session.setItem(TOKEN_KEY, values.get("token"));
  // Only a page with no configured API may be pointed at one by a link (never at another on AWS).
  if (values.get("api") && !config.api_url) session.setItem(API_KEY, values.get("api"));
  if (window.location.hash) window.history.replaceState(null, "", window.location.pathname + window.location.search);
}

function showSignIn(problem) {
  clearTimeout(timer);
  $("sign-in-panel").hidden = false;
  $("jobs-column").hidden = true;
  $("job").hidden = true;
  $("no-job").hidden = true;
  $("sign-out").hidden = true;
  $("who").textContent = "";
  $("sign-in-error").textContent = problem || "";
  $("sign-in-error").hidden = !problem;
  showConnection(false, problem ? "signed out" : "not signed in");
}

function showSignedIn() {
  const found = claims(token());
  const tenant = found[config.tenant_claim];
  const until = found.exp ? ` · token valid until ${new Date(found.exp * 1000).toISOString().slice(11, 16)} UTC` : "";
  $("who").textContent = `${tenant ? `tenant ${tenant}` : "signed in"}${until}`;
  $("sign-out").hidden = false;
  $("sign-in-panel").hidden = true;
  $("jobs-column").hidden = false;
}

class Refused extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function call(path, options = {}) {
  const response = await fetch(`${apiBase()}${path}`, {
    cache: "no-store",
    ...options,
    headers: { Authorization: `Bearer ${token()}`, ...(options.headers || {}) },
  });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Refused(response.status, body.error || body.message || `${response.status}`);
  return body;
}

// The API's view of a job as the shared rendering reads it (a tenant knows its job by its id alone).
function listed(view) {
  return { ...view, name: view.job_id, submitted_at: view.created_at };
}

async function showDetail(jobId) {
  const detail = await call(`/jobs/${encodeURIComponent(jobId)}/detail`);
  const view = detail.job;
  renderJob({ ...detail, job: listed(view) });
  $("download-box").hidden = !view.download_url;
  if (view.download_url) $("download").setAttribute("href", view.download_url);
  // A test render's pictures: a link each (the page's policy shows no image from the bucket's origin).
  const frames = view.frames || [];
  $("pictures").replaceChildren(
    ...frames.map((f) => el("a", { href: f.download_url, rel: "noopener noreferrer" }, `frame ${f.frame}`)),
  );
  $("pictures").hidden = frames.length === 0;
  // The latest frame changes while the job runs; an ended job's is fetched once.
  const live = !view.ended;
  if (!detail.preview) showPreview(null);
  else if (live || previewFor !== jobId) {
    const preview = await call(`/jobs/${encodeURIComponent(jobId)}/preview`).catch(() => null);
    showPreview(preview && preview.image);
  }
  previewFor = live ? null : jobId;
  return view;
}

async function refresh() {
  clearTimeout(timer);
  if (!token()) return showSignIn();
  if (!apiBase()) return showSignIn("This page has no API configured (config.json, or #api=… on the local stack).");
  showSignedIn();
  const jobId = selectedJob();
  try {
    const jobs = await call("/jobs?limit=50");
    let rows = jobs.jobs.map(listed);
    renderJobs(rows, jobs.now, refresh);
    if (jobId) {
      try {
        // The detail is read after the list; its row takes that newer state, so list and job page agree.
        const fresh = listed(await showDetail(jobId));
        rows = rows.map((row) => (row.job_id === fresh.job_id ? fresh : row));
        renderJobs(rows, jobs.now, refresh);
      } catch (error) {
        if (error.status === 401) throw error;
        showNoJob(`Job ${jobId}: ${error.message}`);
      }
    } else {
      showNoJob();
    }
    showConnection(true, `updated ${new Date(Date.parse(jobs.now)).toISOString().slice(11, 19)} UTC`);
  } catch (error) {
    if (error.status === 401 || error.status === 403) {
      session.removeItem(TOKEN_KEY);
      return showSignIn(`The API refused the token: ${error.message}`);
    }
    showConnection(false, `API unreachable: ${error.message}`);
  }
  timer = setTimeout(refresh, POLL_MS);
}

async function send(path) {
  const body = await call(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
  return body.message;
}

const act = (action) => pressAction(action, send, refresh);

document.addEventListener("DOMContentLoaded", async () => {
  config = await fetch("config.json", { cache: "no-store" })
    .then((response) => (response.ok ? response.json() : {}))
    .catch(() => ({}));
  takeFragment();
  wirePage(refresh, act);
  $("sign-in").addEventListener("submit", (event) => {
    event.preventDefault();
    session.setItem(TOKEN_KEY, $("token-input").value.trim());
    $("token-input").value = "";
    refresh();
  });
  $("sign-out").addEventListener("click", () => {
    session.removeItem(TOKEN_KEY);
    showSignIn();
  });
  refresh();
});
