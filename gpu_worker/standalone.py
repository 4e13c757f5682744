"""`fusionfleet swap` / `python -m gpu_worker swap`: render one video on this machine, no cloud parts.

The same engine, frame pipeline, encoder settings and merge checks the workers use.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from fusionfleet.errors import FusionFleetError
from fusionfleet.facefusion.flags import add_facefusion_options, collect_facefusion_options
from fusionfleet.facefusion.options import OptionsError
from fusionfleet.facefusion.reference import reference_frame_problem, reference_frame_wanted
from fusionfleet.facefusion.requirements import SourceKind, alpha_problems
from fusionfleet.jobs.audio import audio_plan
from fusionfleet.jobs.encoding import encoder_settings
from fusionfleet.jobs.engine_options import check_engine_options, check_sources, selects_faces
from fusionfleet.jobs.manifest import QUALITIES, invalid_manifest
from fusionfleet.jobs.output_format import DEFAULT_CONTAINER, container_of_key
from fusionfleet.jobs.timeline import timeline, trim_problem
from fusionfleet.media.info import AudioInfo
from fusionfleet.media.limits import MediaLimits
from fusionfleet.media.probe import probe_video
from fusionfleet.media.ranges import FileRangeSource, RangeReader
from fusionfleet.media.sniff import SNIFF_BYTES, sniff_source
from fusionfleet.media.source_audio import copy_audio, probe_audio
from fusionfleet.media.still import frame_at
from fusionfleet.progress import ProgressLine, bar
from gpu_worker.engines.base import EngineError, EngineJob, Image
from gpu_worker.engines.registry import create_engine, default_engine_name, engine_names
from gpu_worker.merging.audio import extract_audio
from gpu_worker.merging.merge import assemble
from gpu_worker.rendering.frames import start_range
from gpu_worker.rendering.sources import decode_image

GOP_SECONDS = 4


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fusionfleet swap", description=__doc__)
    parser.add_argument(
        "--source", action="append", required=True, type=Path,
        help="face image, or one audio file for the lip syncer (repeat for several)",
    )  # fmt: skip
    parser.add_argument("--target", required=True, type=Path, help="the video to swap faces in")
    parser.add_argument("--output", required=True, type=Path, help="where to write the result (.mp4)")
    parser.add_argument("--engine", choices=engine_names(), default=None, help="default: FaceFusion if installed")
    parser.add_argument("--quality", choices=QUALITIES, default="balanced", help="built-in engine preset")
    parser.add_argument("--reference", type=Path, help="reference face image for --face-selector-mode reference")
    add_facefusion_options(parser)
    return parser


def swap(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    limits = MediaLimits()
    options = collect_facefusion_options(args)
    engine_name = args.engine or default_engine_name()
    check_engine_options(engine_name, options)
    reader = RangeReader(FileRangeSource(args.target), f"target {args.target.name!r}")
    video = probe_video(reader, f"target {args.target.name!r}", limits)
    width, height = video.display_size
    trimmed = trim_problem(options, video.frame_count)
    if trimmed:
        raise invalid_manifest([trimmed])
    frames = timeline(options, video.frame_count, video.fps)
    gop = max(1, round(float(frames.output_fps) * GOP_SECONDS))
    # The container the output's name says, its encoders FaceFusion's for it (fusionfleet.jobs.output_format).
    container = container_of_key(args.output.name) or DEFAULT_CONTAINER
    settings = encoder_settings(width, height, frames.output_fps, options, gop, engine=engine_name, container=container)
    if engine_name == "facefusion" and (problems := alpha_problems(options, settings.codec, None)):
        raise invalid_manifest(problems)  # background_remover that would change nothing, as the slicer says
    kinds, sources, audio_source = read_sources(args.source, limits)
    check_sources(engine_name, options, kinds)
    reference = decode_image(args.reference.read_bytes(), "reference", limits) if args.reference else None
    wanted = reference_frame_wanted(options, reference is not None) if selects_faces(engine_name) else None
    if wanted is not None:
        # As on the fleet (and in FaceFusion): the reference face comes from that frame of the whole video.
        problem = reference_frame_problem(wanted, video.frame_count)
        if problem:
            raise invalid_manifest([problem])
        frame_reader = RangeReader(FileRangeSource(args.target), f"target {args.target.name!r}")
        reference = frame_at(frame_reader, video, wanted, f"target {args.target.name!r}")
    began = time.monotonic()
    engine = create_engine(engine_name, env)
    engine.prepare()
    load_s = time.monotonic() - began
    workdir = Path(tempfile.mkdtemp(prefix="fusionfleet-swap-"))
    try:
        heard = None if audio_source is None else copy_audio(*audio_source, workdir, "the audio source")
        job = EngineJob(
            job_id="swap", sources=sources, options=MappingProxyType(options), quality=args.quality,
            reference=reference, reference_is_frame=wanted is not None, fps=float(video.fps), work_dir=workdir,
            audio=heard, timeline=frames, alpha=settings.alpha,
        )  # fmt: skip
        engine.validate(job)
        line = ProgressLine()
        total = frames.output_frames()

        def progress(done: int) -> None:
            if done % 5 == 0 or done == total:
                elapsed = max(1e-6, time.monotonic() - render_began)
                line.show(f"{bar(done, total)} {done}/{total} frames, {done / elapsed:.1f} fps")

        render_began = time.monotonic()
        stats = start_range(
            engine, job, reader, video, [(frames.start, frames.end)], settings, workdir, threading.Event(), "swap",
            on_frame=progress, timeline=frames,
        ).settle()  # fmt: skip
        part = workdir / f"{frames.start:07d}-{frames.end:07d}.mp4"
        line.done()
        args.output.parent.mkdir(parents=True, exist_ok=True)
        if heard is None:
            audio_reader = RangeReader(FileRangeSource(args.target), f"target {args.target.name!r}")
            audio = extract_audio(audio_reader, video, workdir, args.target.name)
        merged = workdir / f"output.{container}"
        summary = assemble(
            [part], heard or audio, video, merged, args.target.name, audio_plan(engine_name, options, container),
            frames, None if audio_source is None else audio_source[1], container,
        )  # fmt: skip
        shutil.move(str(merged), args.output)
    finally:
        engine.close()
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"{args.output}: {summary.frame_count} frames, {summary.duration_s:.2f} s, "
        f"{len(summary.audio_durations_s)} audio track(s); engine {engine_name} "
        f"(load {load_s:.2f} s, {stats.frames / max(1e-6, stats.wall_s):.1f} fps)",
        file=sys.stderr,
    )
    return 0


def read_sources(
    paths: list[Path], limits: MediaLimits
) -> tuple[list[SourceKind], tuple[Image, ...], tuple[RangeReader, AudioInfo] | None]:
    """Each source's kind, the face images decoded, and the first audio file (probed) with its reader."""
    kinds: list[SourceKind] = []
    images: list[Image] = []
    audio: tuple[RangeReader, AudioInfo] | None = None
    for path in paths:
        what = f"source {path.name!r}"
        reader = RangeReader(FileRangeSource(path), what)
        if sniff_source(reader.head(SNIFF_BYTES), what) == "image":
            images.append(decode_image(path.read_bytes(), what, limits))
            kinds.append("image")
        else:
            info = probe_audio(reader, what, limits)
            audio = audio or (RangeReader(FileRangeSource(path), what), info)
            kinds.append("audio")
    return kinds, tuple(images), audio


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        return swap(args, os.environ)
    except OptionsError as error:
        print("invalid options: " + "; ".join(error.problems), file=sys.stderr)
        return 2
    except (FusionFleetError, EngineError) as error:
        print(f"error: {error.reason}", file=sys.stderr)
        return 1
