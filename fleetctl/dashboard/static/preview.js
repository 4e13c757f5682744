// FusionFleet tenant page: the New job form's preview, before the whole run. The chosen target plays in
// the browser's own video element (for the formats it plays, from the file itself: nothing is sent to
// scrub it); the person picks frames, and a test render of those frames (a job with `frames`, the API's
// POST /jobs: docs/test-renders.md) runs with the form's engine and options; each rendered frame is
// shown beside the original. Change an option, preview again; Start job (tenant.js) runs the whole job or
// batch with the same settings, naming the files a preview already sent by their keys.
"use strict";

const MAX_TRY_FRAMES = 16; // a test render's limit (fusionfleet.jobs.manifest)
const TRY_POLL_MS = 1000;
const TRY_WAIT_MS = 15 * 60 * 1000;
const THUMB_WIDTH = 320;

// The target being previewed: its file, its object URL, the length of one frame (measured as it plays)
// and its last frame, the frames picked (frame → their row), and the settings the rendered frames show.
const tried = { videos: [], file: null, url: null, step: null, last: 0, picked: new Map(), shownWith: null };

const sayTry = (text) => ($("try-status").textContent = text);

function onTargetsChanged() {
  tried.videos = [...$("new-targets").files].filter((file) => file.type.startsWith("video/"));
  $("try-panel").hidden = tried.videos.length === 0;
  $("try-target").replaceChildren(...tried.videos.map((file, index) => el("option", { value: index }, file.name)));
  $("try-target-choice").hidden = tried.videos.length < 2;
  loadTryTarget(tried.videos[0] || null);
}

// Everything of the previous target gone: its picked frames, its renders, its object URL.
function loadTryTarget(file) {
  if (tried.url) URL.revokeObjectURL(tried.url);
  Object.assign(tried, { file, url: file ? URL.createObjectURL(file) : null, step: null, last: 0, shownWith: null });
  tried.picked.clear();
  $("try-frames").replaceChildren();
  $("try-scrub").max = "0";
  $("try-at").textContent = "–";
  sayTry(file ? `Loading ${file.name}…` : "");
  const video = $("try-video");
  if (tried.url) video.setAttribute("src", tried.url);
  else video.removeAttribute("src");
}

function resetPreview() {
  onTargetsChanged();
}

// The length of one frame: the smallest step between the times of the frames shown while it plays a
// moment, muted (the browser tells no frame rate). The farm numbers frames from 0 at that rate.
async function measureFrameStep(video) {
  if (!video.requestVideoFrameCallback) return null;
  const times = [];
  await new Promise((resolve) => {
    const enough = setTimeout(resolve, 3000);
    const tick = (_now, shown) => {
      times.push(shown.mediaTime);
      if (times.length >= 6) {
        clearTimeout(enough);
        resolve();
      } else video.requestVideoFrameCallback(tick);
    };
    video.requestVideoFrameCallback(tick);
    video.play().catch(() => resolve());
  });
  video.pause();
  const steps = times.slice(1).map((time, index) => time - times[index]).filter((step) => step > 1e-4);
  return steps.length ? Math.min(...steps) : null;
}

async function onTryMetadata() {
  const video = $("try-video");
  const file = tried.file;
  const step = await measureFrameStep(video);
  if (file !== tried.file) return; // another target was chosen meanwhile
  if (!step) return sayTry(`This browser does not show ${file.name}'s frames: no frame can be picked here.`);
  tried.step = step;
  tried.last = Math.max(0, Math.round(video.duration / step) - 1);
  $("try-scrub").max = String(tried.last);
  video.currentTime = 0;
  showTryPosition();
  sayTry(`Scrub ${file.name} to a frame and pick it; pick up to ${MAX_TRY_FRAMES}.`);
}

function frameAt(time) {
  return Math.min(tried.last, Math.max(0, Math.floor(time / tried.step + 1e-3)));
}

function showTryPosition() {
  if (!tried.step) return;
  const frame = frameAt($("try-video").currentTime);
  $("try-scrub").value = String(frame);
  $("try-at").textContent = `frame ${frame} of 0–${tried.last} · ${(1 / tried.step).toFixed(2)} fps`;
}

// The middle of a frame's time, so the browser shows that frame and no neighbour.
function seekToFrame(frame) {
  if (tried.step) $("try-video").currentTime = (Number(frame) + 0.5) * tried.step;
}

// The frame shown now, as it is: a small JPEG drawn from the video element (the file never left here).
function thumbnail(video) {
  const scale = Math.min(1, THUMB_WIDTH / Math.max(1, video.videoWidth));
  const canvas = el("canvas", { width: Math.round(video.videoWidth * scale), height: Math.round(video.videoHeight * scale) });
  canvas.getContext("2d").drawImage(video, 0, 0, canvas.width, canvas.height);
  return canvas.toDataURL("image/jpeg", 0.85);
}

async function pickFrame() {
  const video = $("try-video");
  if (!tried.step) return sayTry("The target is not ready: no frame can be picked yet.");
  if (video.seeking) await new Promise((resolve) => video.addEventListener("seeked", resolve, { once: true }));
  const frame = frameAt(video.currentTime);
  if (tried.picked.has(frame)) return sayTry(`Frame ${frame} is picked already.`);
  if (tried.picked.size >= MAX_TRY_FRAMES) return sayTry(`A preview renders at most ${MAX_TRY_FRAMES} frames.`);
  const row = el("li", { dataset: { frame } },
    el("figure", {}, el("img", { src: thumbnail(video), alt: `frame ${frame} original` }),
      el("figcaption", {}, `frame ${frame} · original`)),
    el("figure", { className: "rendered" }, el("img", { alt: `frame ${frame} rendered`, hidden: "" }),
      el("figcaption", {}, "not previewed yet")),
    el("button", { type: "button", className: "secondary", "aria-label": `remove frame ${frame}`,
      onclick: () => { tried.picked.delete(frame); row.remove(); } }, "Remove"));
  tried.picked.set(frame, row);
  const after = [...tried.picked.keys()].filter((other) => other > frame).sort((a, b) => a - b)[0];
  $("try-frames").insertBefore(row, after === undefined ? null : tried.picked.get(after));
  sayTry(`Frame ${frame} picked; press Preview frames to render ${tried.picked.size === 1 ? "it" : "them"}.`);
}

function describeSettings(settings) {
  const options = Object.entries(settings.options).map(([name, value]) => `${words(name)} ${[value].flat().join(" ")}`);
  return `the ${settings.engine} engine, ${options.length ? options.join(", ") : "FaceFusion's defaults"}`;
}

async function untilEnded(jobId) {
  const deadline = Date.now() + TRY_WAIT_MS;
  for (;;) {
    const view = await call(`/jobs/${encodeURIComponent(jobId)}`);
    if (view.ended) return view;
    if (Date.now() > deadline) throw new Error(`test render ${jobId} has not ended; see it in the jobs list`);
    await new Promise((resolve) => setTimeout(resolve, TRY_POLL_MS));
  }
}

function showRendered(frame, url, said) {
  const row = tried.picked.get(frame);
  if (!row) return; // removed meanwhile
  const figure = row.querySelector("figure.rendered");
  const image = figure.querySelector("img");
  image.addEventListener("load", () => (image.hidden = false), { once: true });
  image.addEventListener("error", () => (figure.querySelector("figcaption").textContent = `frame ${frame}: its picture did not load`), { once: true });
  image.setAttribute("src", url);
  figure.classList.remove("stale");
  figure.querySelector("figcaption").textContent = said;
}

async function runPreview() {
  const sources = [...$("new-sources").files];
  const frames = [...tried.picked.keys()].sort((a, b) => a - b);
  if (!sources.length) return sayTry("Choose the source faces first.");
  if (!frames.length) return sayTry("Pick a frame first.");
  const settings = formSettings();
  const body = { source: sources.map(fileRef), target: fileRef(tried.file), frames, priority: "high", ...settings };
  showNewJobError("");
  $("try-run").disabled = true;
  try {
    sayTry("Sending the files…");
    const jobId = await createAndStart(body, [...sources, tried.file]);
    sayTry(`Rendering frame${frames.length > 1 ? "s" : ""} ${frames.join(", ")} (test render ${jobId})…`);
    const view = await untilEnded(jobId);
    // Only a succeeded test render carries its frames (the page renders what it is given, names no state)
    if (!(view.frames || []).length) throw new Error(`test render ${jobId} ${view.state}: ${view.reason || ""}`);
    for (const picture of view.frames || []) showRendered(picture.frame, picture.download_url, `frame ${picture.frame} · rendered`);
    tried.shownWith = JSON.stringify(settings);
    sayTry(`Rendered with ${describeSettings(settings)} (test render ${jobId}). Start job runs it all with these.`);
  } catch (error) {
    sayTry(`The preview was not rendered: ${error.message}`);
    if (error.problems && error.problems.length) showNewJobError("The preview was refused:", error.problems);
  } finally {
    $("try-run").disabled = false;
  }
}

// An option changed after a preview: its frames no longer show what Start job would run.
function onSettingsChanged() {
  if (tried.shownWith === null || !catalogue) return;
  const stale = JSON.stringify(formSettings()) !== tried.shownWith;
  for (const figure of $("try-frames").querySelectorAll("figure.rendered")) figure.classList.toggle("stale", stale);
  if (stale) sayTry("The options changed since this preview: Preview frames again to see them.");
}

document.addEventListener("DOMContentLoaded", () => {
  const video = $("try-video");
  $("new-targets").addEventListener("change", onTargetsChanged);
  $("try-target").addEventListener("change", () => loadTryTarget(tried.videos[Number($("try-target").value)]));
  video.addEventListener("loadedmetadata", onTryMetadata);
  video.addEventListener("error", () => tried.file && sayTry(`This browser does not play ${tried.file.name}: no frame can be picked here.`));
  for (const event of ["seeked", "timeupdate"]) video.addEventListener(event, showTryPosition);
  $("try-scrub").addEventListener("input", () => seekToFrame($("try-scrub").value));
  $("try-pick").addEventListener("click", pickFrame);
  $("try-run").addEventListener("click", runPreview);
  for (const event of ["input", "change"]) $("new-job").addEventListener(event, onSettingsChanged);
});
