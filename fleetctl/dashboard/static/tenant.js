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
  constructor(status, message, problems = []) {
    super(message);
    this.status = status;
    this.problems = problems;
  }
}

async function call(path, options = {}) {
  const response = await fetch(`${apiBase()}${path}`, {
    cache: "no-store",
    ...options,
    headers: { Authorization: `Bearer ${token()}`, ...(options.headers || {}) },
  });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    throw new Refused(response.status, body.error || body.message || `${response.status}`, body.problems || []);
  }
  return body;
}

// The API's view of a job as the shared rendering reads it (a tenant knows its job by its id alone).
function listed(view) {
  return { ...view, name: view.job_id, submitted_at: view.created_at };
}

async function showDetail(jobId) {
  const detail = await call(`/jobs/${encodeURIComponent(jobId)}/detail?${itemsQuery(jobId)}`);
  const view = detail.job;
  renderJob({ ...detail, job: listed(view) });
  $("download-box").hidden = !view.download_url;
  if (view.download_url) $("download").setAttribute("href", view.download_url);
  // A finished output plays here: the job's own, or a batch's item (the first finished one until another
  // item's Play is pressed).
  const playing = $("output").dataset.key || "";
  if (view.download_url) playOutput(view.download_url, jobId, "the output");
  else if (!playing.startsWith(`${jobId}#`)) {
    const item = (detail.items || []).find((found) => found.download_url);
    if (item) playOutput(item.download_url, `${jobId}#${item.index}`, `item ${item.index}: ${item.target}`);
    else playOutput(null);
  }
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

// ---- New job: the files, the engine, the processors and their options as GET /options describes them
// (FaceFusion's own choices, ranges and defaults, the catalogue the API checks jobs against), each file
// uploaded straight to the bucket with the API's presigned POST, then the job started and opened.
let catalogue = null;

const words = (name) => name.replace(/_/g, " ");

async function openNewJob() {
  $("new-job-panel").hidden = false;
  showNewJobError("");
  if (catalogue) return;
  try {
    catalogue = await call("/options");
  } catch (error) {
    return showNewJobError(`The API did not say which options a job may have: ${error.message}`);
  }
  $("new-engine").replaceChildren(
    ...catalogue.engines.map((name) => el("option", { value: name }, name)),
  );
  $("new-engine").value = catalogue.default_engine;
  const processors = catalogue.options.find((option) => option.name === "processors");
  const chosen = new Set(processors.default || []);
  $("new-processors").replaceChildren(
    el("legend", {}, "Processors"),
    ...processors.choices.map((name) => {
      const box = el("input", { type: "checkbox", value: name, title: processors.help });
      box.checked = chosen.has(name);
      box.addEventListener("change", renderProcessorOptions);
      return el("label", {}, box, words(name));
    }),
  );
  renderProcessorOptions();
}

function chosenProcessors() {
  return [...$("new-processors").querySelectorAll("input:checked")].map((box) => box.value);
}

// One control per option: a list for choices, a number for a range (its grid's step), text otherwise.
function optionControl(option) {
  const fallback = Array.isArray(option.default) ? option.default : [option.default];
  let control;
  if (option.choices) {
    control = el("select", option.multiple ? { multiple: "" } : {},
      ...option.choices.map((choice) => el("option", { value: String(choice) }, String(choice))));
    for (const item of control.options) item.selected = fallback.map(String).includes(item.value);
  } else if (option.multiple) {
    // Several numbers (a margin's 1-4 values): written with spaces between them.
    control = el("input", { type: "text", value: fallback.filter((item) => item !== null).join(" ") });
  } else if (option.kind !== "str") {
    control = el("input", { type: "number", min: option.minimum, max: option.maximum,
      step: option.step ?? (option.kind === "int" ? 1 : "any") });
    if (option.default !== null && !option.multiple) control.value = String(option.default);
  } else {
    control = el("input", { type: "text" });
  }
  control.dataset.option = option.name;
  return el("label", { title: option.help }, words(option.name), control,
    el("span", { className: "help" }, option.help));
}

function renderProcessorOptions() {
  $("new-options").replaceChildren(
    ...chosenProcessors().map((processor) =>
      el("fieldset", {}, el("legend", {}, `${words(processor)} options`),
        ...catalogue.options.filter((option) => option.group === words(processor)).map(optionControl)),
    ),
  );
}

// The options a person changed from FaceFusion's defaults (the rest are FaceFusion's own anyway), so a
// job on an engine that applies none of them (copy) is not refused for naming its default processors.
function chosenOptions() {
  const options = {};
  const processors = chosenProcessors();
  const defaults = catalogue.options.find((option) => option.name === "processors").default || [];
  if (JSON.stringify(processors) !== JSON.stringify(defaults)) options.processors = processors;
  for (const control of $("new-options").querySelectorAll("[data-option]")) {
    const option = catalogue.options.find((found) => found.name === control.dataset.option);
    const parse = (text) => (option.kind === "int" ? parseInt(text, 10) : option.kind === "float" ? Number(text) : text);
    let value;
    if (control.multiple) value = [...control.selectedOptions].map((item) => parse(item.value));
    else if (control.value.trim() === "") continue;
    else if (option.multiple) value = control.value.trim().split(/\s+/).map(parse);
    else value = parse(control.value);
    if (JSON.stringify(value) !== JSON.stringify(option.default)) options[option.name] = value;
  }
  return options;
}

function showNewJobError(text, problems = []) {
  $("new-job-error").replaceChildren(text, ...problems.map((problem) => el("span", { className: "problem" }, el("br", {}), problem)));
  $("new-job-error").hidden = !text;
}

function s3Refusal(xhr) {
  const xml = new DOMParser().parseFromString(xhr.responseText || "", "application/xml");
  const code = xml.querySelector("Code")?.textContent;
  return code ? `${code}: ${xml.querySelector("Message")?.textContent || ""}` : `HTTP ${xhr.status}`;
}

// One file as an HTML-form POST to the bucket: every field of the presigned policy, then the file.
function upload(target, file, row) {
  const progress = row.querySelector("progress");
  const said = row.querySelector("output");
  return new Promise((resolve, reject) => {
    const form = new FormData();
    for (const [name, value] of Object.entries(target.fields)) form.append(name, value);
    form.append("file", file);
    const xhr = new XMLHttpRequest();
    xhr.open("POST", target.url);
    xhr.upload.addEventListener("progress", (event) => {
      progress.value = event.loaded;
      said.textContent = `${Math.floor((100 * event.loaded) / Math.max(1, event.total))} %`;
    });
    xhr.addEventListener("load", () => {
      if (xhr.status >= 200 && xhr.status < 300) {
        progress.value = progress.max;
        said.textContent = "uploaded";
        resolve();
      } else {
        said.textContent = "refused";
        reject(new Error(`${file.name}: ${s3Refusal(xhr)}`));
      }
    });
    xhr.addEventListener("error", () => reject(new Error(`${file.name}: the upload did not reach the bucket`)));
    xhr.send(form);
  });
}

// Files already in the bucket (sent for a preview), by the File the form holds: the next request names
// each by its key (the tenant's own, which a job may name) instead of sending it again.
const sent = new Map();

const fileRef = (file) => sent.get(file) || file.name;

// A job for `files` (each named in `body` by fileRef): created, the files not yet sent uploaded (a row of
// progress each under Uploads), and started. Returns its id; throws with the API's or the bucket's refusal.
async function createAndStart(body, files) {
  const fresh = new Map(files.filter((file) => !sent.has(file)).map((file) => [file.name, file]));
  if (fresh.size !== files.filter((file) => !sent.has(file)).length) throw new Error("Each file needs a name of its own.");
  // The sizes let the API refuse a file over the upload limit before any of it is sent.
  const request = { ...body, sizes: Object.fromEntries([...fresh.values()].map((file) => [file.name, file.size])) };
  const created = await call("/jobs", { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify(request) });
  const rows = created.uploads.map((target) => {
    const file = fresh.get(target.name);
    return el("li", { dataset: { file: target.name } }, target.name,
      el("progress", { max: file.size || 1, value: 0, "aria-label": `upload of ${target.name}` }),
      el("output", {}, "waiting"));
  });
  $("new-uploads").replaceChildren(...rows);
  await Promise.all(created.uploads.map((target, index) => upload(target, fresh.get(target.name), rows[index])));
  for (const target of created.uploads) sent.set(fresh.get(target.name), target.key);
  await call(`/jobs/${encodeURIComponent(created.job_id)}/start`, { method: "POST",
    headers: { "Content-Type": "application/json" }, body: "{}" });
  return created.job_id;
}

// What a job of the form runs with, a preview's or the whole run's: the same engine and options.
function formSettings() {
  return { engine: $("new-engine").value, options: chosenOptions() };
}

async function startNewJob(event) {
  event.preventDefault();
  showNewJobError("");
  $("new-uploads").replaceChildren();
  const sources = [...$("new-sources").files];
  const targets = [...$("new-targets").files];
  const names = new Set([...sources, ...targets].map((file) => file.name));
  if (names.size !== sources.length + targets.length) return showNewJobError("Each file needs a name of its own.");
  const body = { source: sources.map(fileRef), priority: $("new-priority").value, ...formSettings() };
  if (targets.length === 1) body.target = fileRef(targets[0]);
  else body.targets = targets.map(fileRef);
  $("new-job-start").disabled = true;
  try {
    const jobId = await createAndStart(body, [...sources, ...targets]);
    // The files are sent: the form is ready for the next job, its uploads listed until then.
    $("new-sources").value = "";
    $("new-targets").value = "";
    sent.clear();
    resetPreview();
    selectJob(jobId, refresh);
  } catch (error) {
    showNewJobError(`The job was not started: ${error.message}`, error.problems || []);
  } finally {
    $("new-job-start").disabled = false;
  }
}

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
  $("new-job-open").addEventListener("click", openNewJob);
  $("new-job-close").addEventListener("click", () => {
    $("new-job-panel").hidden = true;
  });
  $("new-job").addEventListener("submit", startNewJob);
  // A refusal names the files chosen then: choosing others clears it.
  for (const input of ["new-sources", "new-targets"]) $(input).addEventListener("change", () => showNewJobError(""));
  $("sign-out").addEventListener("click", () => {
    session.removeItem(TOKEN_KEY);
    showSignIn();
  });
  refresh();
});
