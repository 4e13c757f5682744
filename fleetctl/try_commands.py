"""`fusionfleet try`: a test render. A few frames of a video rendered at full quality, as the whole job
would render them (fusionfleet.jobs.trial), and written as one PNG per frame into a folder, named by
frame number. It submits a job with `frames` (or `spread_frames`, `--spread N`: the farm chooses N
frames evenly spread over the clip) to the stack (or through the HTTP API with `--api`), follows it
and fetches each frame's picture."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from fleetctl.api_client import ApiClient, download, ended
from fleetctl.client import Client, build_manifest
from fleetctl.exits import EPILOG, Exit, UsageError
from fleetctl.job_commands import check_local_engine, client_of, follow, say
from fusionfleet import layout
from fusionfleet.environment.settings import FUSIONFLEET_API_URL, FUSIONFLEET_TOKEN
from fusionfleet.errors import FusionFleetError, JobRejected
from fusionfleet.facefusion.flags import add_facefusion_options, collect_facefusion_options
from fusionfleet.jobs.manifest import ENGINE_NAMES, MAX_TRY_FRAMES, PRIORITIES, QUALITIES
from fusionfleet.jobs.states import JobState, parse_state
from fusionfleet.jobs.views import JobView
from fusionfleet.media.sniff import SNIFF_BYTES, image_format
from fusionfleet.progress import ProgressLine, bar


def parse_frames(text: str) -> tuple[int, ...]:
    """`0,120,240` → (0, 120, 240): whole frame numbers from 0, each once, at most MAX_TRY_FRAMES. Pure;
    argparse's type: its error is the usage error `argument --frames: …` (exit status 2)."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts:
        raise argparse.ArgumentTypeError("name at least one frame, e.g. --frames 0,120,240")
    bad = [part for part in parts if not part.isdigit()]
    if bad:
        raise argparse.ArgumentTypeError(
            f"{', '.join(map(repr, bad))} not a frame number (whole numbers from 0, comma-separated)"
        )
    frames = tuple(int(part) for part in parts)
    if len(set(frames)) != len(frames):
        raise argparse.ArgumentTypeError("each frame once")
    if len(frames) > MAX_TRY_FRAMES:
        raise argparse.ArgumentTypeError(f"at most {MAX_TRY_FRAMES} frames in one test render, not {len(frames)}")
    return frames


def parse_spread(text: str) -> int:
    """`--spread 8`: that many frames spread over the whole clip, 1 to MAX_TRY_FRAMES. Pure; argparse's type."""
    if not text.strip().isdigit() or not 1 <= int(text) <= MAX_TRY_FRAMES:
        raise argparse.ArgumentTypeError(f"a whole number of frames from 1 to {MAX_TRY_FRAMES}, not {text!r}")
    return int(text)


def picture_name(frame: int) -> str:
    """A frame's file in the output folder, named as the farm names it (`frame-000120.png`)."""
    return layout.trial_frame_key("", frame)


def check_target(target: Path) -> None:
    """A test render renders frames of a video: an image (told by its bytes) is said so before any upload."""
    if not target.is_file():
        raise UsageError(f"{target} is not a file")
    with target.open("rb") as handle:
        found = image_format(handle.read(SNIFF_BYTES))
    if found:
        raise JobRejected(
            f"{target} is a {found} image: a test render renders frames of a video (submit an image whole)"
        )


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    add_connection: Callable[[argparse.ArgumentParser], None],
) -> None:
    trial = commands.add_parser(
        "try", help="a test render: a few frames at full quality, as the whole job renders them, as PNGs",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    trial.add_argument(
        "-s", "--source", "--source-paths", dest="source", action="extend", nargs="+", required=True, type=Path,
        metavar="FILE", help="face image(s) (repeat or list several)",
    )  # fmt: skip
    trial.add_argument(
        "-t", "--target", "--target-path", dest="target", required=True, type=Path, metavar="VIDEO",
        help="the video whose frames are rendered",
    )  # fmt: skip
    which = trial.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--frames", type=parse_frames,
        help=f"frame numbers from 0 in the whole video, comma-separated (at most {MAX_TRY_FRAMES}), e.g. 0,120,240",
    )  # fmt: skip
    which.add_argument(
        "--spread", type=parse_spread, metavar="N",
        help="N frames evenly spread over the video, the first and last included, chosen by the farm once it "
        "has read the video's length (a poster strip)",
    )  # fmt: skip
    trial.add_argument("--output-dir", type=Path, default=Path.cwd(), help="where the pictures go (default: here)")
    trial.add_argument("--priority", default="high", choices=PRIORITIES, help="default high: someone is waiting")
    trial.add_argument("--engine", choices=ENGINE_NAMES)
    trial.add_argument("--quality", choices=QUALITIES, help="built-in engine preset")
    trial.add_argument("--reference", type=Path, help="reference face image for --face-selector-mode reference")
    trial.add_argument("--name", help="job name (default: target name + time)")
    trial.add_argument("--tenant", help="render as this tenant: everything goes under tenants/TENANT/")
    trial.add_argument(
        "--wait", action=argparse.BooleanOptionalAction, default=True,
        help="follow it and fetch its pictures (the default); --no-wait prints its id at once, and "
        "`fusionfleet wait ID --output-dir DIR` fetches them later",
    )  # fmt: skip
    trial.add_argument(
        "--timeout", type=float, default=600, metavar="S",
        help="seconds to wait for the pictures before giving up with exit status 4 (default 600)",
    )  # fmt: skip
    trial.add_argument("--api", help=f"render through the HTTP API at this URL; env {FUSIONFLEET_API_URL}")
    trial.add_argument("--token", help=f"bearer token for --api; env {FUSIONFLEET_TOKEN}")
    add_connection(trial)
    add_facefusion_options(trial)


def cmd_try(args: argparse.Namespace) -> int:
    for path in [*args.source, *([args.reference] if args.reference else [])]:
        if not path.is_file():
            raise UsageError(f"{path} is not a file")
    check_target(args.target)
    api_url = args.api or os.environ.get(FUSIONFLEET_API_URL)
    if api_url:
        token = args.token or os.environ.get(FUSIONFLEET_TOKEN)
        if not token:
            raise UsageError(f"--api needs a token: pass --token or set {FUSIONFLEET_TOKEN}")
        return _try_api(args, ApiClient(api_url, token))
    check_local_engine(args, collect_facefusion_options(args))
    client = client_of(args)
    submission = client.submit(
        args.source, args.target, args.priority, args.engine, args.quality, args.reference,
        collect_facefusion_options(args), args.name, say, tenant=args.tenant, frames=args.frames or (),
        spread=args.spread or 0,
    )  # fmt: skip
    say(f"test render {submission.job_id}: {_asked(args)}")
    if not args.wait:
        print(submission.job_id, flush=True)
        return Exit.DONE
    view = follow(client, args, submission.job_id, _describe)
    code = _ended(view.state if view.ended else None, view.reason, args.timeout)
    if code is None:
        code = fetch_pictures(client, view, args.frames or client.trial_frames(submission.job_id), args.output_dir)
    print(submission.job_id, flush=True)
    return code


def fetch_pictures(client: Client, view: JobView, frames: Sequence[int], folder: Path) -> int:
    """A succeeded test render's pictures into `folder`, one PNG per frame named by its number (also what
    `wait` and `download` of a test render write)."""
    return _fetch_all(folder, frames, lambda frame, path: _download_local(client, view, frame, path))


def _asked(args: argparse.Namespace) -> str:
    if args.frames:
        return f"frames {', '.join(map(str, args.frames))}"
    return f"{args.spread} frame(s) spread over the video"


def _describe(view: JobView) -> str:
    counts = view.segments
    if not counts.total:
        return str(view.state)
    return f"{view.state} {bar(counts.done, counts.total)} {counts.done}/{counts.total} frames"


def _download_local(client: Client, view: JobView, frame: int, path: Path) -> None:
    if view.output_object is None:
        raise FusionFleetError(f"job {view.job_id} succeeded without an output prefix")
    bucket, prefix = view.output_object
    client.download_object(bucket, layout.trial_frame_key(prefix, frame), path)


def _ended(state: JobState | None, reason: str, timeout_s: float) -> int | None:
    """The exit status of a test render that did not succeed (None: it did, fetch its pictures)."""
    if state is None:
        say(f"gave up waiting after {timeout_s:.0f} s")
        return Exit.GAVE_UP
    if state is JobState.SUCCEEDED:
        return None
    say(f"{state.lower()}: {reason}")
    return Exit.REJECTED if state is JobState.REJECTED else Exit.FAILED


def _fetch_all(folder: Path, frames: Sequence[int], fetch: Callable[[int, Path], object]) -> int:
    if not frames:
        raise FusionFleetError("the test render succeeded but names no frames")
    folder.mkdir(parents=True, exist_ok=True)
    for frame in frames:
        path = folder / picture_name(frame)
        fetch(frame, path)
        say(f"frame {frame} → {path}")
    say(f"{len(frames)} frame(s) in {folder}")
    return 0


def _try_api(args: argparse.Namespace, client: ApiClient) -> int:
    """The same test render through the HTTP API: files named by their role, each frame fetched by its link."""
    files = {f"source-{i}{path.suffix.lower()}": path for i, path in enumerate(args.source)}
    target = f"target{args.target.suffix.lower()}"
    files[target] = args.target
    reference = f"reference{args.reference.suffix.lower()}" if args.reference else None
    if args.reference:
        files[str(reference)] = args.reference
    sources = [name for name in files if name.startswith("source-")]
    body = build_manifest(
        sources, target, "", args.priority, args.engine, args.quality, reference, collect_facefusion_options(args)
    )
    del body["output"]  # the API places the pictures under the tenant's prefix
    if args.frames:
        body["frames"] = list(args.frames)
    else:
        body["spread_frames"] = args.spread
    job_id = client.submit(files, body, say)
    say(f"test render {job_id}: {_asked(args)}")
    if not args.wait:
        print(job_id, flush=True)
        return Exit.DONE
    line = ProgressLine()
    status = client.wait(job_id, args.timeout, lambda s: line.show(str(s["state"])))
    line.done()
    state = parse_state(str(status["state"])) if ended(status) else None
    code = _ended(state, str(status.get("reason", "")), args.timeout)
    if code is None:
        links = {int(item["frame"]): str(item["download_url"]) for item in status.get("frames") or []}
        frames = args.frames or sorted(links)
        missing = [frame for frame in frames if frame not in links]
        if missing:
            raise FusionFleetError(f"job {job_id} succeeded but the API gave no link for frame(s) {missing}")
        code = _fetch_all(args.output_dir, frames, lambda frame, path: download(links[frame], path))
    print(job_id, flush=True)
    return code
