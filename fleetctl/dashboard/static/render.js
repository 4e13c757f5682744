// FusionFleet pages' shared rendering: the operator's dashboard (app.js) and the tenant's page
// (tenant.js) draw the job list and a job's page with these functions, from the read model's view of
// a job (fusionfleet/jobs/views.py): its state, reason, segment counts, whether it has ended and the
// actions it allows now are given, never worked out here.
// Every piece of data reaches the page as text (textContent, attribute values), never as HTML.
"use strict";

const POLL_MS = 2000;
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

function selectJob(jobId, refresh) {
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

// jobs: [{job_id, name, state, priority, segments: {done, failed, total}, submitted_at, kind?, items?}]
// A batch is one row whose progress is its items' (kind "batch"); choosing it opens its items.
function renderJobs(jobs, now, refresh) {
  const body = $("jobs").tBodies[0];
  const chosen = selectedJob();
  const rows = jobs.map((job) => {
    const batch = job.kind === "batch";
    const counts = batch ? job.items : job.segments;
    const row = el(
      "tr",
      {
        className: job.job_id === chosen ? "selected" : "",
        dataset: { jobId: job.job_id, state: job.state, kind: job.kind || "job" },
      },
      el("td", { className: "name", title: job.job_id }, job.name || job.job_id, batch ? el("span", { className: "badge kind-batch" }, "BATCH") : null),
      el("td", {}, badge(job.state)),
      el("td", {}, job.priority || "–"),
      el("td", {}, progressBar(counts.done, counts.failed, counts.total)),
      el("td", { className: "num" }, batch ? `${counts.done}/${counts.total} items` : `${counts.done}/${counts.total}`),
      el("td", { className: "num" }, formatAge(secondsBetween(now, job.submitted_at))),
    );
    row.addEventListener("click", () => selectJob(job.job_id, refresh));
    return row;
  });
  body.replaceChildren(...rows);
  $("jobs-empty").hidden = rows.length > 0;
}

function segmentCell(segment) {
  const state = String(segment.state);
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

function renderTimings(timings) {
  const items = Object.entries(timings || {}).flatMap(([key, value]) => {
    const seconds = key.endsWith("_s") && typeof value === "number";
    const label = (seconds ? key.slice(0, -2) : key).replace(/_/g, " ");
    let text = typeof value === "object" && value !== null ? JSON.stringify(value) : number(value, seconds ? "s" : "");
    if (typeof value === "string" && ISO_TIME.test(value)) {
      text = `${new Date(Date.parse(value)).toISOString().slice(11, 19)} UTC`;
    } else if (key.endsWith("_at") && typeof value === "number") {
      text = `${new Date(value * 1000).toISOString().slice(11, 19)} UTC`; // epoch seconds (merge_started_at)
    }
    return [el("dt", {}, label), el("dd", {}, text)];
  });
  $("timings").replaceChildren(...(items.length ? items : [el("dd", { className: "empty" }, "not yet")]));
}

// Every attempt (failed, killed and backup copies too) at its worker's price; "so far" while any runs.
function renderCost(cost) {
  $("cost-title").textContent = cost && !cost.final ? "Cost so far" : "Cost";
  const byCapacity = Object.entries((cost && cost.usd_by_capacity) || {})
    .map(([capacity, usd]) => `${capacity} $${Number(usd).toFixed(4)}`)
    .join(" · ");
  $("cost").replaceChildren(
    ...(cost
      ? [
          el("dt", {}, "GPU engine"), el("dd", {}, number(cost.engine_gpu_s, "s")),
          el("dt", {}, "GPU billed"), el("dd", {}, `${number(cost.billed_gpu_s, "s")} over ${number(cost.attempts)} attempts`),
          el("dt", {}, "estimate"),
          el("dd", { id: "cost-usd" }, `$${Number(cost.estimated_usd).toFixed(4)} at $${cost.gpu_hourly_price}/GPU-hour`),
          el("dt", {}, "wasted"), el("dd", { id: "cost-wasted" }, `$${Number(cost.wasted_usd || 0).toFixed(4)}`),
          el("dt", {}, "by capacity"), el("dd", { id: "cost-capacity" }, byCapacity || "–"),
        ]
      : [el("dd", { className: "empty" }, "not yet")]),
  );
}

// deliveries: [{event, event_id, sequence, state, reason, attempts: [{number, at, status, error, duration_s}]}]
function renderDeliveries(deliveries) {
  const rows = (deliveries || []).map((d) => {
    const last = d.attempts.length ? d.attempts[d.attempts.length - 1] : null;
    const answer = last ? (last.status === null ? "no answer" : String(last.status)) : "–";
    return el(
      "tr",
      { className: `delivery-${String(d.state).toLowerCase()}`, dataset: { event: d.event, state: d.state } },
      el("td", { className: "num" }, d.sequence || "–"),
      el("td", {}, d.event),
      el("td", { className: "num" }, d.attempts.length),
      el("td", {}, answer),
      el("td", { className: "num" }, last ? clock(last.at) : "–"),
      el("td", {}, d.state),
      el("td", { className: "error" }, (last && last.error) || d.reason || ""),
    );
  });
  $("webhooks").tBodies[0].replaceChildren(...rows);
  $("webhooks-empty").hidden = rows.length > 0;
}

function renderAttempts(attempts) {
  const rows = attempts.map((a) =>
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

// detail: {job: {job_id, name, state, priority, submitted_at, output, reason, actions, targets?},
//          now, segments: [SegmentView], attempts: [AttemptView], timings, cost}
function renderJob(detail) {
  const job = detail.job;
  const section = $("job");
  section.hidden = false;
  $("no-job").hidden = true;
  // The job's own counts: a long job's detail carries one page of its segments.
  const counts = job.segments || {};
  const done = counts.done ?? detail.segments.filter((s) => s.state === "done").length;
  const failed = counts.failed ?? detail.segments.filter((s) => s.state === "failed").length;
  const total = counts.total ?? detail.segments.length;
  Object.assign(section.dataset, {
    jobId: job.job_id,
    state: job.state,
    done: String(done),
    total: String(total),
  });
  $("job-name").textContent = job.name || job.job_id;
  $("job-state").replaceChildren(badge(job.state));
  const meta = [job.job_id, `priority ${job.priority || "–"}`];
  if (job.submitted_at) meta.push(`submitted ${formatAge(secondsBetween(detail.now, job.submitted_at))} ago`);
  if (job.output) meta.push(`output ${job.output}`);
  // Known before the slicer took it (PENDING): what its manifest names.
  if (job.targets && job.targets.length) {
    meta.push(job.targets.length === 1 ? `target ${job.targets[0]}` : `${job.targets.length} targets`);
  }
  $("job-meta").textContent = meta.join(" · ");
  $("job-reason").textContent = job.reason || "";
  $("job-reason").hidden = !job.reason;
  const actions = job.actions || [];
  $("cancel").disabled = !actions.includes("cancel");
  $("retry").disabled = !actions.includes("retry");
  $("seg-done").textContent = String(done);
  $("seg-failed").textContent = String(failed);
  $("seg-total").textContent = String(total);
  $("segments").replaceChildren(...detail.segments.map(segmentCell));
  renderItems(detail.items, detail.next_item, job.items);
  renderTimings(detail.timings);
  renderCost(detail.cost);
  renderAttempts(detail.attempts);
  renderDeliveries(detail.deliveries);
  renderPictures(detail.pictures || []);
}

// A test render's pictures (the operator's page only): each frame's PNG, linked to itself.
function renderPictures(urls) {
  const box = $("pictures");
  if (box.dataset.shown === urls.join(" ")) return; // the images stay while the job is polled
  box.dataset.shown = urls.join(" ");
  box.replaceChildren(
    ...urls.map((src) =>
      el("figure", {}, el("a", { href: src }, el("img", { src, alt: "test render frame" })),
         el("figcaption", {}, `frame ${src.split("/").pop()}`)),
    ),
  );
  box.hidden = urls.length === 0;
}

// A batch's items, a page at a time: the page shown (its first index) and its size (25, or `?items=N` in
// the page's address). Both pages ask their API for `itemsQuery(job)`; the buttons move it and refresh.
const ITEM_PAGE = 25;
const itemPage = { job: null, first: 0 };

function itemPageSize() {
  const asked = Number.parseInt(new URLSearchParams(window.location.search).get("items"), 10);
  return asked >= 1 && asked <= 500 ? asked : ITEM_PAGE;
}

function itemsQuery(jobId) {
  if (itemPage.job !== jobId) Object.assign(itemPage, { job: jobId, first: 0 });
  return `items_from=${itemPage.first}&items=${itemPageSize()}`;
}

function turnItemPage(first) {
  if (first === null || first === undefined) return;
  itemPage.first = Math.max(0, first);
  itemRefresh();
}

// A finished output in the job's own player (the tenant's page: `url` is the API's presigned link). `key`
// names what it shows, so a poll's fresh link of the same output does not restart it.
function playOutput(url, key, caption) {
  const video = $("output");
  $("output-box").hidden = !url;
  if (!url) {
    if (video.getAttribute("src")) video.removeAttribute("src");
    delete video.dataset.key;
    return;
  }
  if (video.dataset.key === key) return;
  video.dataset.key = key;
  video.setAttribute("src", url);
  $("output-caption").textContent = caption;
}

// A page of a batch's items (`next` is the first index of the next page, null on the last), each as the
// read model shows it: {index, job_id, target, state, segments: {done, failed, total}, output, reason,
// download_url?}. An item with a `job_id` opens as a job of its own (the operator's); one with a
// `download_url` (the tenant's) plays in the job's player. `counts` are the batch's.
function renderItems(items, next, counts) {
  $("items-box").hidden = !items;
  if (!items) return;
  const rows = items.map((item) => {
    const output = item.download_url
      ? [el("a", { href: item.download_url, rel: "noopener noreferrer" }, item.output), " ",
         el("button", { type: "button", className: "secondary play", "aria-label": `play item ${item.index}`,
           onclick: (event) => {
             event.stopPropagation();
             playOutput(item.download_url, `${selectedJob()}#${item.index}`, `item ${item.index}: ${item.target}`);
           } }, "Play")]
      : [item.output || item.reason || ""];
    const row = el(
      "tr",
      { className: `item-${String(item.state).toLowerCase()}`, dataset: { item: item.index, itemState: item.state } },
      el("td", { className: "num" }, item.index),
      el("td", { className: "name", title: item.target }, item.target),
      el("td", {}, badge(item.state)),
      el("td", {}, progressBar(item.segments.done, item.segments.failed, item.segments.total)),
      el("td", { className: item.reason ? "error" : "name" }, ...output),
    );
    if (item.job_id) row.addEventListener("click", () => selectJob(item.job_id, itemRefresh));
    return row;
  });
  $("items").tBodies[0].replaceChildren(...rows);
  const total = counts ? counts.total : items.length;
  $("item-done").textContent = String(counts ? counts.done : 0);
  $("item-failed").textContent = String(counts ? counts.failed : 0);
  $("item-total").textContent = String(total);
  const first = items.length ? items[0].index : itemPage.first;
  const more = next !== null && next !== undefined;
  $("items-pages").hidden = !more && first === 0;
  $("items-previous").disabled = first === 0;
  $("items-next").disabled = !more;
  $("items-next").dataset.first = more ? String(next) : "";
  $("items-more").textContent = items.length
    ? `items ${first}–${items[items.length - 1].index} of ${total}`
    : `no items from ${first} (of ${total})`;
}

// The page's refresh (wirePage sets it), for an item's row to open the item.
let itemRefresh = () => {};

// The job list's state filter: the states the read model names, with "all" first.
function renderStateFilter(states) {
  const select = $("state-filter");
  if (select.options.length > 1 || !states) return;
  select.append(...states.map((state) => el("option", {}, state)));
}

function showPreview(src) {
  const preview = $("preview");
  if (src) {
    if (preview.getAttribute("src") !== src) preview.setAttribute("src", src);
  } else {
    preview.removeAttribute("src");
    $("preview-box").hidden = true;
  }
}

function showNoJob(text) {
  $("job").hidden = true;
  $("no-job").hidden = false;
  if (text) $("no-job").textContent = text;
}

function showConnection(ok, text) {
  const node = $("connection");
  node.dataset.ok = String(ok);
  node.textContent = text;
}

function showActionResult(ok, text) {
  const message = $("action-message");
  message.textContent = text;
  message.dataset.ok = String(ok);
  message.hidden = false;
}

// A Cancel or Retry press on the chosen job: `send(path)` posts `/jobs/{id}/{action}` to the page's API
// and returns the answer's message, or throws with the refusal.
async function pressAction(action, send, refresh) {
  const jobId = selectedJob();
  if (!jobId) return;
  if (action === "cancel" && !window.confirm(`Cancel job ${jobId}?`)) return;
  try {
    showActionResult(true, await send(`/jobs/${encodeURIComponent(jobId)}/${action}`));
  } catch (error) {
    showActionResult(false, `${action} refused: ${error.message}`);
  }
  refresh();
}

// Wiring both pages share: buttons, history, and the preview box that hides an image it cannot show.
function wirePage(refresh, act) {
  itemRefresh = refresh;
  $("items-previous").addEventListener("click", () => turnItemPage(itemPage.first - itemPageSize()));
  $("items-next").addEventListener("click", () => turnItemPage(Number($("items-next").dataset.first)));
  $("output").addEventListener("error", () => delete $("output").dataset.key); // an expired link: the next poll's
  $("cancel").addEventListener("click", () => act("cancel"));
  $("retry").addEventListener("click", () => act("retry"));
  window.addEventListener("popstate", refresh);
  $("preview").addEventListener("error", () => ($("preview-box").hidden = true));
  $("preview").addEventListener("load", () => ($("preview-box").hidden = false));
}
