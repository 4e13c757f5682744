"""A job's estimate before it is submitted (fusionfleet.jobs.estimate): the planner's segments, the engine's
per-frame cost, GPU time and price; and the defaults the CLI states, held to template.yaml."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest

from fleetctl import connection, estimate_commands
from fleetctl.cli import build_parser
from fleetctl.local.state import LocalState, ManagedProcess
from fusionfleet.jobs.cost import DEFAULT_GPU_HOURLY_PRICE, GpuPrices
from fusionfleet.jobs.estimate import COST_SOURCES, estimate
from fusionfleet.jobs.plan import plan_segments
from fusionfleet.jobs.sizing import ENGINE_COSTS, FleetView, engine_cost, plan_for_fleet
from tests.support.template import ROOT

FPS = Fraction(25)


def test_a_clip_is_cut_as_the_slicer_cuts_it_and_priced_per_gpu_second() -> None:
    # GIVEN 300 frames for the classic engine on two workers at 0.5 $/GPU-hour, 0.2 on Spot
    found = estimate("classic", 300, FPS, 2, GpuPrices(0.5, 0.2))
    # THEN the plan is the planner's own
    assert found.segments == plan_for_fleet(300, FPS, engine_cost("classic"), FleetView(0, 2))
    # AND the GPU time is every frame, every segment's lead-in (none before the first) and fixed part
    cost = ENGINE_COSTS["classic"]
    lead_ins = cost.lead_in_frames * (len(found.segments) - 1)
    expected = (300 + lead_ins) * cost.seconds_per_frame + len(found.segments) * cost.overhead_s
    assert found.gpu_s == pytest.approx(expected)
    assert found.usd_on_demand == pytest.approx(expected / 3600 * 0.5)
    assert found.usd_spot == pytest.approx(expected / 3600 * 0.2)
    # AND the wall time is rounds of segments on two workers, shorter than the GPU time
    assert found.gpu_s / 2 <= found.wall_s < found.gpu_s


def test_a_trimmed_clip_counts_only_its_frames_and_starts_without_a_lead_in() -> None:
    found = estimate("classic", 100, FPS, 4, GpuPrices(), first=50)
    assert (found.segments[0].start_frame, found.segments[-1].end_frame) == (50, 150)
    assert found.usd_spot is None  # no Spot price: Spot hosts are priced as On-Demand


def test_a_picture_is_one_segment_of_one_frame() -> None:
    found = estimate("facefusion", 1, Fraction(1), 8, GpuPrices())
    assert [(s.start_frame, s.end_frame) for s in found.segments] == [(0, 1)]
    cost = ENGINE_COSTS["facefusion"]
    assert found.gpu_s == pytest.approx(cost.seconds_per_frame + cost.overhead_s) == found.wall_s


def test_processors_no_figure_covers_are_named_not_guessed() -> None:
    found = estimate("facefusion", 50, FPS, 1, GpuPrices(), processors=("face_swapper", "face_enhancer"))
    assert found.unpriced == ("face_enhancer",)
    with pytest.raises(ValueError, match="at least one frame"):
        estimate("classic", 0, FPS, 1, GpuPrices())


def test_every_engine_figure_says_where_it_comes_from() -> None:
    assert set(COST_SOURCES) == set(ENGINE_COSTS)
    assert "not measured" in COST_SOURCES["facefusion"]  # sizing.py: an estimate, no GPU here


def _default(parameter: str) -> str:
    found = re.search(rf"\n  {parameter}:\n(?:    .*\n)*?    Default: (.*)\n", (ROOT / "template.yaml").read_text())
    assert found is not None, parameter
    return found.group(1).strip().strip('"')


def test_the_defaults_the_estimate_states_are_the_templates() -> None:
    assert float(_default("GpuHourlyPrice")) == DEFAULT_GPU_HOURLY_PRICE
    assert float(_default("GpuSpotHourlyPrice")) == 0  # 0: Spot priced as On-Demand, as stated
    assert int(_default("RenderMaxTasks")) == estimate_commands.TEMPLATE_RENDER_MAX_TASKS
    assert _default("DefaultEngine") == estimate_commands.TEMPLATE_DEFAULT_ENGINE
    assert f"GpuHourlyPrice {DEFAULT_GPU_HOURLY_PRICE}" in estimate_commands.TEMPLATE_PRICES.source


def _local_fleet(monkeypatch: pytest.MonkeyPatch, max_workers: int) -> estimate_commands.Fleet:
    """What `estimate` plans for on a local stack of two render workers started with --max-workers as given."""
    state = LocalState(port=4566, region="us-east-1", stack="fusionfleet", fleet_max_workers=max_workers,
                       processes=[ManagedProcess("worker", f"worker-{n}", 1, "log") for n in (1, 2)])  # fmt: skip
    monkeypatch.setattr(connection, "local_stack", lambda *_args: state)
    monkeypatch.setattr(estimate_commands, "_stack_parameters", lambda _args: None)
    args = build_parser().parse_args(["estimate", "-s", "face.jpg", "-t", "clip.mp4"])
    return estimate_commands.fleet_of(args)


def test_on_a_local_stack_without_an_autoscaler_the_plan_is_the_slicers_fixed_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN a local stack `local up` started without --max-workers: its slicer has no fleet to size for
    fleet = _local_fleet(monkeypatch, 0)
    found = estimate("classic", 300, FPS, fleet.workers, GpuPrices(), sized=fleet.sized)
    # THEN the estimate cuts the slicer's fixed plan (preparing.Preparer._plan), not a fleet-sized one: 12 s
    # at 25 fps were estimated as 4 segments while the slicer cut 3 (found on a first try)
    assert not fleet.sized and found.segments == plan_segments(300, FPS)
    assert len(found.segments) == 3 != len(estimate("classic", 300, FPS, 2, GpuPrices()).segments)
    # AND with --max-workers its slicer sizes for that maximum, and so does the estimate
    fleet = _local_fleet(monkeypatch, 6)
    assert fleet.sized and (fleet.workers, fleet.where) == (6, "the local stack's --max-workers")
