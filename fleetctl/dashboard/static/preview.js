// FusionFleet tenant page: the New job form's preview, before the whole run. The chosen target plays in
// the browser's own video element (for the formats it plays, from the file itself: nothing is sent to
// scrub it); the person picks frames, and a test render of those frames (a job with `frames`, the API's
// POST /jobs: docs/test-renders.md) runs with the form's engine and options; each rendered frame is
// shown beside the original. Change an option, preview again; Start job (tenant.js) runs the whole job or
// batch with the same settings, naming the files a preview already sent by their keys.
// A target the browser does not play (HEVC, a codec or container it lacks) is picked from a poster strip
// instead: Show poster strip has the farm show frames evenly spread over it (a test render with the copy
// engine, frames out = frames in, and `spread_frames`: the farm chooses them, for only it reads the target's
// length), and a click on one picks it, its picture the original. A frame may be typed by number too, and
// Show originals has the farm show such picked frames as they are; a number past the end is refused with
// the API's reason, naming its last frame.
"use strict";

const MAX_TRY_FRAMES = 16; // a test render's limit (fusionfleet.jobs.manifest)
const TRY_POLL_MS = 1000;
const TRY_WAIT_MS = 15 * 60 * 1000;
const THUMB_WIDTH = 320;
const ORIGINALS_ENGINE = "copy";
const STRIP_FRAMES = 8; // the poster strip's frames, first and last included

// The target being previewed: its file, its object URL, the length of one frame (measured as it plays)
// and its last frame, the frames picked (frame → their row), the settings the rendered frames show, and
// (a target the browser does not play) its poster strip's pictures (frame → link).
const tried = { videos: [], file: null, url: null, step: null, last: 0, picked: new Map(), shownWith: null,
  byNumber: false, strip: new Map() };

const sayTry = (text) => ($("try-status").textContent = text);

function onTargetsChanged() {
  // Every target that is no picture: a browser names no type for some videos it does not know (.mkv).
  tried.videos = [...$("new-targets").files].filter((file) => !file.type.startsWith("image/"));
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
  tried.strip.clear();
  showPickByNumber(false);
  $("try-frames").replaceChildren();
  $("try-strip-frames").replaceChildren();
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

// The player, or (a target the browser cannot show) the farm's poster strip, a frame number to type, and
// the farm's originals.
function showPickByNumber(byNumber) {
  tried.byNumber = byNumber;
  const farmShows = byNumber && Boolean(catalogue && catalogue.engines.includes(ORIGINALS_ENGINE));
  $("try-video").hidden = byNumber;
  $("try-scrub-choice").hidden = byNumber;
  $("try-at").hidden = byNumber;
  $("try-number-choice").hidden = !byNumber;
  $("try-originals").hidden = !farmShows;
  $("try-strip").hidden = !farmShows;
  $("try-strip-frames").hidden = !byNumber || tried.strip.size === 0;
}

function pickByNumber(file, why) {
  if (file !== tried.file || tried.byNumber) return;
  showPickByNumber(true);
  const strip = $("try-strip").hidden ? "" :
    `Show poster strip has the farm show ${STRIP_FRAMES} frames spread over it, to pick from; or `;
  sayTry(`${why}: ${strip}type a frame number (from 0) and pick it, up to ${MAX_TRY_FRAMES}; ` +
    "Show originals has the farm show the picked frames as they are.");
}

async function onTryMetadata() {
  const video = $("try-video");
  const file = tried.file;
  // Its container read but no picture decoded (HEVC in a browser without it): no frame to show.
  if (!video.videoWidth) return pickByNumber(file, `This browser does not show ${file.name}'s pictures`);
  const step = await measureFrameStep(video);
  if (file !== tried.file) return; // another target was chosen meanwhile
  if (!step) return pickByNumber(file, `This browser does not show ${file.name}'s frames`);
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
  let frame;
  let drawn = null;
  if (tried.byNumber) {
    frame = Number($("try-number").value);
    if (!Number.isInteger(frame) || frame < 0) return sayTry("A frame number is a whole number from 0.");
  } else {
    if (!tried.step) return sayTry("The target is not ready: no frame can be picked yet.");
    if (video.seeking) await new Promise((resolve) => video.addEventListener("seeked", resolve, { once: true }));
    frame = frameAt(video.currentTime);
    drawn = thumbnail(video);
  }
  addPicked(frame, drawn || tried.strip.get(frame) || null);
}

// A picked frame's row: its original (drawn from the player, or the strip's picture of it, or, picked by
// number, the farm's once Show originals is pressed) and, once previewed, its render.
function addPicked(frame, originalSrc) {
  if (tried.picked.has(frame)) return sayTry(`Frame ${frame} is picked already.`);
  if (tried.picked.size >= MAX_TRY_FRAMES) return sayTry(`A preview renders at most ${MAX_TRY_FRAMES} frames.`);
  const original = originalSrc === null
    ? el("figure", { className: "original" }, el("img", { alt: `frame ${frame} original`, hidden: "" }),
        el("figcaption", {}, `frame ${frame} · original not shown yet`))
    : el("figure", { className: "original" }, el("img", { src: originalSrc, alt: `frame ${frame} original` }),
        el("figcaption", {}, `frame ${frame} · original`));
  const row = el("li", { dataset: { frame } },
    original,
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

// A picture of a picked frame from the farm, in its row's `which` figure ("rendered" or "original").
function showPicture(frame, which, url, said) {
  const row = tried.picked.get(frame);
  if (!row) return; // removed meanwhile
  const figure = row.querySelector(`figure.${which}`);
  const image = figure.querySelector("img");
  image.addEventListener("load", () => (image.hidden = false), { once: true });
  image.addEventListener("error", () => (figure.querySelector("figcaption").textContent = `frame ${frame}: its picture did not load`), { once: true });
  image.setAttribute("src", url);
  figure.classList.remove("stale");
  figure.querySelector("figcaption").textContent = said;
}

// A test render of the target with the form's sources and `fields` (engine, options, its frames), said as
// `doing` while it runs. Returns its id and its frames' pictures, or null (what went wrong said in the
// status line, the API's problems under the form).
async function testRender(fields, doing) {
  const sources = [...$("new-sources").files];
  if (!sources.length) {
    sayTry("Choose the source faces first.");
    return null;
  }
  const body = { source: sources.map(fileRef), target: fileRef(tried.file), priority: "high", ...fields };
  const buttons = [$("try-run"), $("try-originals"), $("try-strip")];
  showNewJobError("");
  for (const button of buttons) button.disabled = true;
  try {
    sayTry("Sending the files…");
    const jobId = await createAndStart(body, [...sources, tried.file]);
    sayTry(`${doing} (test render ${jobId})…`);
    const view = await untilEnded(jobId);
    // Only a succeeded test render carries its frames (the page renders what it is given, names no state)
    if (!(view.frames || []).length) throw new Error(`test render ${jobId} ${view.state}: ${view.reason || ""}`);
    return { jobId, pictures: view.frames };
  } catch (error) {
    sayTry(`The preview was not rendered: ${error.message}`);
    if (error.problems && error.problems.length) showNewJobError("The preview was refused:", error.problems);
    return null;
  } finally {
    for (const button of buttons) button.disabled = false;
  }
}

// A test render of the picked frames with `settings`, each picture put in its row's `which` figure. Returns
// its job id, or null.
async function renderPicked(settings, which) {
  const frames = [...tried.picked.keys()].sort((a, b) => a - b);
  if (!frames.length) {
    sayTry("Pick a frame first.");
    return null;
  }
  const done = await testRender({ frames, ...settings }, `Rendering frame${frames.length > 1 ? "s" : ""} ${frames.join(", ")}`);
  if (!done) return null;
  for (const picture of done.pictures) showPicture(picture.frame, which, picture.download_url, `frame ${picture.frame} · ${which}`);
  return done.jobId;
}

// The poster strip: the farm's pictures of frames spread over the target (chosen by the farm, which reads
// its length), as they are, each a button that picks its frame.
async function showStrip() {
  const file = tried.file;
  const done = await testRender({ engine: ORIGINALS_ENGINE, options: {}, spread_frames: STRIP_FRAMES },
    `Reading ${STRIP_FRAMES} frames spread over ${file.name}`);
  if (!done || file !== tried.file) return; // failed (said), or another target was chosen meanwhile
  tried.strip = new Map(done.pictures.map((picture) => [picture.frame, picture.download_url]));
  const frames = [...tried.strip.keys()].sort((a, b) => a - b);
  $("try-strip-frames").replaceChildren(...frames.map((frame) => el("li", {},
    el("button", { type: "button", className: "poster", "aria-label": `pick frame ${frame}`, onclick: () => addPicked(frame, tried.strip.get(frame)) },
      el("img", { src: tried.strip.get(frame), alt: `frame ${frame} poster` }),
      el("span", {}, `frame ${frame}`)))));
  $("try-strip-frames").hidden = false;
  sayTry(`Frames ${frames[0]}–${frames[frames.length - 1]} of ${file.name}, spread over it (test render ${done.jobId}): ` +
    "click one to pick it.");
}

async function runPreview() {
  const settings = formSettings();
  const jobId = await renderPicked(settings, "rendered");
  if (!jobId) return;
  tried.shownWith = JSON.stringify(settings);
  sayTry(`Rendered with ${describeSettings(settings)} (test render ${jobId}). Start job runs it all with these.`);
}

// The picked frames as they are, for a target the browser does not play: the copy engine's test render.
async function showOriginals() {
  const jobId = await renderPicked({ engine: ORIGINALS_ENGINE, options: {} }, "original");
  if (jobId) sayTry(`The picked frames as they are, read by the farm (test render ${jobId}).`);
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
  video.addEventListener("error", () => tried.file && pickByNumber(tried.file, `This browser does not play ${tried.file.name}`));
  for (const event of ["seeked", "timeupdate"]) video.addEventListener(event, showTryPosition);
  $("try-scrub").addEventListener("input", () => seekToFrame($("try-scrub").value));
  $("try-pick").addEventListener("click", pickFrame);
  $("try-run").addEventListener("click", runPreview);
  $("try-originals").addEventListener("click", showOriginals);
  $("try-strip").addEventListener("click", showStrip);
  for (const event of ["input", "change"]) $("new-job").addEventListener(event, onSettingsChanged);
});
