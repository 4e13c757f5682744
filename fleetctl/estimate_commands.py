"""`fusionfleet estimate` and `submit --confirm`: a job's frames, segments, GPU time and price before anything
is uploaded or spent (fusionfleet.jobs.estimate).

`estimate` takes `submit`'s flags, so `submit` can be replaced by `estimate` in any line. The target is
probed here, as the slicer probes it; the fleet size and the GPU prices are the stack's where it answers
(its RenderMaxTasks, GpuHourlyPrice and GpuSpotHourlyPrice parameters; the local stack's render workers),
else the template's defaults, else what the flags say; the output says which.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from fleetctl import connection
from fleetctl.batch_client import target_files
from fleetctl.exits import EPILOG, UsageError
from fleetctl.job_commands import say
from fusionfleet.errors import FusionFleetError, InputRejected, JobRejected
from fusionfleet.facefusion.flags import collect_facefusion_options
from fusionfleet.facefusion.requirements import SourceKind
from fusionfleet.jobs.cost import DEFAULT_GPU_HOURLY_PRICE, GpuPrices
from fusionfleet.jobs.engine_options import check_sources
from fusionfleet.jobs.estimate import Estimate, Prices, estimate
from fusionfleet.jobs.timeline import timeline, trim_problem
from fusionfleet.media.image import check_image, image_as_video
from fusionfleet.media.info import VideoInfo
from fusionfleet.media.limits import MediaLimits
from fusionfleet.media.probe import probe_video
from fusionfleet.media.ranges import FileRangeSource, RangeReader
from fusionfleet.media.sniff import SNIFF_BYTES, image_format, sniff_source

# The template's defaults (template.yaml; tests/unit/test_estimate.py holds them equal): the fleet's most
# render tasks, the engine of a job that names none on AWS, and the price of a Spot GPU-hour (0: none).
TEMPLATE_RENDER_MAX_TASKS = 4
TEMPLATE_DEFAULT_ENGINE = "facefusion"
TEMPLATE_PRICES = Prices(
    GpuPrices(DEFAULT_GPU_HOURLY_PRICE),
    f"template.yaml's defaults: GpuHourlyPrice {DEFAULT_GPU_HOURLY_PRICE} $/GPU-hour (g5.xlarge On-Demand in "
    "us-east-1), GpuSpotHourlyPrice 0 (Spot priced as On-Demand)",
)


@dataclass(frozen=True)
class Fleet:
    workers: int
    default_engine: str
    prices: Prices
    where: str  # what the fleet size was read from
    sized: bool = True  # False: the stack's slicer cuts the fixed plan (a local stack without --max-workers)


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], submit: argparse.ArgumentParser
) -> argparse.ArgumentParser:
    """`estimate` with every flag `submit` takes (its parent), then its own; and `submit --confirm`."""
    parser = commands.add_parser(
        "estimate", parents=[submit], conflict_handler="resolve", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        help="a job's frames, segments, GPU time and price before it is submitted (submit's flags; uploads nothing)",
    )  # fmt: skip
    parser.add_argument(
        "--workers", type=int, metavar="N",
        help="plan for N render workers (default: the stack's RenderMaxTasks, the local stack's, else template's 4)",
    )  # fmt: skip
    parser.add_argument("--gpu-hourly-price", type=float, metavar="USD", help="dollars per On-Demand GPU-hour")
    parser.add_argument("--gpu-spot-hourly-price", type=float, metavar="USD", help="dollars per Spot GPU-hour")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    submit.add_argument(
        "--confirm",
        action="store_true",
        help="show the job's estimate (`fusionfleet estimate`) and ask before submitting",
    )
    return parser


def _stack_parameters(args: argparse.Namespace) -> tuple[dict[str, str], str] | None:
    """The deployed stack's parameters and its name, where the stack answers; None otherwise (said why)."""
    try:
        conn = connection.of_args(args, os.environ)
        stacks = conn.aws.client("cloudformation").describe_stacks(StackName=conn.stack_name)["Stacks"]
    except (FusionFleetError, BotoCoreError, ClientError) as error:
        say(f"no stack read ({error}): the template's defaults")
        return None
    found = {item["ParameterKey"]: item.get("ParameterValue", "") for item in stacks[0].get("Parameters", [])}
    return found, conn.stack_name


def _number(value: str | None) -> float | None:
    try:
        return None if value is None else float(value)
    except ValueError:
        return None


def fleet_of(args: argparse.Namespace) -> Fleet:
    """The fleet the job would meet and its prices: the flags, else the stack, else the template's defaults."""
    local = connection.local_stack(args.endpoint_url, os.environ, args.where, args.profile)
    prices, workers, where = TEMPLATE_PRICES, TEMPLATE_RENDER_MAX_TASKS, "the template's RenderMaxTasks"
    engine = (local.default_engine if local else None) or TEMPLATE_DEFAULT_ENGINE
    if args.gpu_hourly_price is None or args.workers is None:
        read = _stack_parameters(args)
        if read is not None:
            parameters, name = read
            on_demand = _number(parameters.get("GpuHourlyPrice"))
            spot = _number(parameters.get("GpuSpotHourlyPrice"))
            if on_demand is not None:
                prices = Prices(GpuPrices(on_demand, spot or None), f"stack {name}'s GpuHourlyPrice {on_demand:g} "
                                f"and GpuSpotHourlyPrice {spot or 0:g} (0: Spot priced as On-Demand)")  # fmt: skip
            tasks = _number(parameters.get("RenderMaxTasks"))
            if tasks and local is None:
                workers, where = int(tasks), f"stack {name}'s RenderMaxTasks"
    sized = True
    if local is not None:
        renderers = len(local.by_role("worker"))  # `local up`'s render workers (`gpu_worker --role render`)
        if renderers:
            workers, where = renderers, "the local stack's render workers"
        # Its slicer sizes plans only for an autoscaled fleet (preparing.Preparer._plan): up to its maximum.
        sized = local.fleet_max_workers > 0
        if sized and local.fleet_max_workers > workers:
            workers, where = local.fleet_max_workers, "the local stack's --max-workers"
    if args.workers is not None:
        workers, where, sized = args.workers, "--workers", True
    if args.gpu_hourly_price is not None:
        spot = args.gpu_spot_hourly_price
        prices = Prices(GpuPrices(args.gpu_hourly_price, spot or None), "--gpu-hourly-price"
                        + (" and --gpu-spot-hourly-price" if spot else " (Spot priced as On-Demand)"))  # fmt: skip
    return Fleet(max(1, workers), engine, prices, where, sized)


def probe(path: Path) -> VideoInfo:
    """The target as the slicer sees it (a picture: one frame), from its bytes, not its name."""
    limits = MediaLimits()
    with path.open("rb") as handle:
        head = handle.read(SNIFF_BYTES)
    if image_format(head):
        return image_as_video(check_image(path.read_bytes(), str(path), limits), path.stat().st_size)
    return probe_video(RangeReader(FileRangeSource(path), str(path)), str(path), limits)


def judge_sources(paths: Sequence[Path], engine: str, options: Mapping[str, object]) -> None:
    """The sources as the farm judges them before it renders (each a face image or an audio file by its first
    bytes, what the engine needs of them), refused with the farm's own reasons, every one: JobRejected."""
    for path in paths:
        if not path.is_file():
            raise UsageError(f"{path} is not a file")
    kinds: list[SourceKind] = []
    problems: list[str] = []
    for index, path in enumerate(paths):
        with path.open("rb") as handle:
            head = handle.read(SNIFF_BYTES)
        try:
            kinds.append(sniff_source(head, f"source[{index}] {str(path)!r}"))
        except InputRejected as rejected:
            problems.extend(rejected.problems)
    if problems:
        raise JobRejected("; ".join(problems), tuple(problems))
    check_sources(engine, options, kinds)


def estimates(args: argparse.Namespace, fleet: Fleet) -> list[tuple[Path, VideoInfo, Estimate]]:
    if getattr(args, "facefusion_job", None) is not None:
        raise UsageError("estimate takes -s/-t like submit; a FaceFusion job file is not estimated")
    if not args.target:
        raise UsageError("the following arguments are required: -t/--target/--target-path")
    options: dict[str, Any] = collect_facefusion_options(args)
    processors = tuple(options.get("processors") or ("face_swapper",))
    engine = args.engine or fleet.default_engine
    if args.source:
        judge_sources(args.source, engine, options)
    found = []
    for path in target_files(args.target):
        info = probe(path)
        problem = trim_problem(options, info.frame_count)
        if problem:
            raise UsageError(f"{path}: {problem}")
        frames = timeline(options, info.frame_count, info.fps)
        found.append((path, info, estimate(engine, frames.frames, info.fps, fleet.workers, fleet.prices.gpu,
                                           frames.start, processors, fleet.sized)))  # fmt: skip
    return found


def _usd(value: float) -> str:
    return f"${value:.4f}" if value >= 0.01 else f"${value:.6f}"


def lines(found: list[tuple[Path, VideoInfo, Estimate]], fleet: Fleet) -> list[str]:
    shown: list[str] = []
    for path, info, item in found:
        segment_frames = sorted({segment.frame_count for segment in item.segments})
        sizes = "-".join(str(n) for n in (segment_frames[0], segment_frames[-1]) if n) if len(segment_frames) > 1 \
            else str(segment_frames[0])  # fmt: skip
        shown += [
            f"target    {path}: {info.width}×{info.height}, "
            + ("a picture" if item.frames == 1 else f"{float(item.fps):g} fps, {item.frames} frames rendered"),
            f"plan      {len(item.segments)} segment(s) of {sizes} frames, "
            + (f"sized for {item.workers} worker(s) ({fleet.where})" if fleet.sized
               else "the fixed 4 s plan (the local stack has no autoscaler to size for)"),
            f"engine    {item.engine}: {item.cost.seconds_per_frame:g} s a frame, {item.cost.overhead_s:g} s and "
            f"{item.cost.lead_in_frames} lead-in frames a segment ({item.cost_source})",
            f"GPU time  {item.gpu_s:.1f} s ({item.gpu_s / 3600:.4f} GPU-hours); about {item.wall_s:.1f} s of "
            f"rendering on {item.workers} worker(s), queues and merge apart",
            "price     " + _usd(item.usd_on_demand) + " On-Demand"
            + (f", {_usd(item.usd_spot)} on Spot" if item.usd_spot is not None else ""),
        ]  # fmt: skip
        if item.unpriced:
            shown.append(f"note      not priced in: {', '.join(item.unpriced)} (no measured figure): a floor")
    if len(found) > 1:
        total = sum(item.usd_on_demand for _p, _i, item in found)
        gpu = sum(item.gpu_s for _p, _i, item in found)
        shown.append(f"batch     {len(found)} items: {gpu:.1f} GPU-s, {_usd(total)} On-Demand")
    shown.append(f"prices    {fleet.prices.source}")
    return shown


def as_json(found: list[tuple[Path, VideoInfo, Estimate]], fleet: Fleet) -> dict[str, Any]:
    items = [
        {"target": str(path), "width": info.width, "height": info.height, "fps": float(item.fps),
         "frames": item.frames, "segments": [segment.to_dict() for segment in item.segments],
         "workers": item.workers, "engine": item.engine, "seconds_per_frame": item.cost.seconds_per_frame,
         "per_segment_s": item.cost.overhead_s, "lead_in_frames": item.cost.lead_in_frames,
         "cost_source": item.cost_source, "gpu_s": round(item.gpu_s, 3), "wall_s": round(item.wall_s, 3),
         "usd_on_demand": round(item.usd_on_demand, 6),
         "usd_spot": None if item.usd_spot is None else round(item.usd_spot, 6), "unpriced": list(item.unpriced)}
        for path, info, item in found
    ]  # fmt: skip
    return {"items": items, "workers_from": fleet.where, "prices": {"on_demand": fleet.prices.gpu.on_demand,
            "spot": fleet.prices.gpu.spot, "source": fleet.prices.source}}  # fmt: skip


def cmd_estimate(args: argparse.Namespace) -> int:
    fleet = fleet_of(args)
    found = estimates(args, fleet)
    if args.json:
        print(json.dumps(as_json(found, fleet), indent=2), flush=True)
    else:
        print("\n".join(lines(found, fleet)), flush=True)
    return 0


def confirmed(args: argparse.Namespace) -> bool:
    """`submit --confirm`: the estimate on stderr, then a question; only `y` or `yes` submits."""
    for name in ("workers", "gpu_hourly_price", "gpu_spot_hourly_price"):
        setattr(args, name, getattr(args, name, None))
    fleet = fleet_of(args)
    for line in lines(estimates(args, fleet), fleet):
        say(line)
    print("submit it? [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    if answer in ("y", "yes"):
        return True
    say("not submitted")
    return False
