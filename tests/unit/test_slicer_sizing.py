"""The slicer sizes plans to the fleet when it knows the fleet's maximum, and keeps fixed plans otherwise."""

from __future__ import annotations

import time
from fractions import Fraction
from pathlib import Path

import pytest

from fusionfleet import layout
from fusionfleet.adapters.storage import get_json
from fusionfleet.environment.contract import from_env
from fusionfleet.environment.slicer import SlicerEnvironment
from fusionfleet.fleet.fairness import fair_concurrency
from fusionfleet.fleet.presence import fleet_view
from fusionfleet.jobs.sizing import FleetView, engine_cost, sized_segment_count
from fusionfleet.messages import WorkerBeat
from fusionfleet.services.slicing import Slicer
from tests.support.fakes import FakeNotifier, FakeOrchestrator, FakeStorage
from tests.support.jobs import slicer_config
from tests.support.media import write_video
from tests.support.tenants import MACHINE, MEDIA, TOPIC, WORK, drop


@pytest.fixture(scope="module")
def twelve_seconds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_video(tmp_path_factory.mktemp("sizing") / "twelve.mp4", seconds=12, fps=25, width=160, height=120)


def plan_of(
    storage: FakeStorage, fleet_max_workers: int, clip: Path, orchestrator: FakeOrchestrator | None = None
) -> list[dict[str, int]]:
    config = slicer_config(WORK, MACHINE, TOPIC, fleet_max_workers=fleet_max_workers)
    slicer = Slicer(storage, orchestrator or FakeOrchestrator(), FakeNotifier(), config)
    key = drop(storage, clip, None, {"version": 1, "source": ["inputs/face.jpg"], "target": "inputs/clip.mp4",
                                     "engine": "classic"})  # fmt: skip
    outcome = slicer.handle(MEDIA, key)
    assert outcome.status == "started", outcome.reason
    plan: list[dict[str, int]] = get_json(storage, WORK, layout.plan_key(outcome.job_id))
    return plan


def beat(storage: FakeStorage, name: str, role: str, age_s: float) -> None:
    record = WorkerBeat(name=name, role=role, last_beat=time.time() - age_s)
    storage.put_bytes(WORK, layout.worker_key(name), record.model_dump_json().encode())


def test_without_a_fleet_maximum_the_plan_is_the_fixed_one(twelve_seconds: Path) -> None:
    # GIVEN a slicer that knows no fleet maximum WHEN a 12 s clip arrives THEN it is 3 segments of 4 s
    assert [s["end_frame"] - s["start_frame"] for s in plan_of(FakeStorage(), 0, twelve_seconds)] == [100] * 3


def test_a_fleet_of_two_gets_a_plan_in_whole_rounds(twelve_seconds: Path) -> None:
    # GIVEN a fleet of at most two workers WHEN a 12 s clip arrives
    plan = plan_of(FakeStorage(), 2, twelve_seconds)
    # THEN it is cut into an even number of frame-exact segments (both workers end together)
    assert len(plan) == sized_segment_count(300, Fraction(25), engine_cost("classic"), FleetView(0, 2)) == 4
    assert sum(s["end_frame"] - s["start_frame"] for s in plan) == 300


def test_live_render_workers_beyond_the_maximum_count(twelve_seconds: Path) -> None:
    # GIVEN presence records: three live render workers, one lost, one merge worker; a maximum of 2
    storage = FakeStorage()
    for name in ("w1", "w2", "w3"):
        beat(storage, name, "render", age_s=1)
    beat(storage, "w4", "render", age_s=600)
    beat(storage, "merge-1", "merge", age_s=1)
    # WHEN the fleet is looked at THEN three run, and the plan is for three
    view = fleet_view(storage, WORK, 2, time.time())
    assert (view.running, view.workers) == (3, 3)
    plan = plan_of(storage, 2, twelve_seconds)
    assert len(plan) == sized_segment_count(300, Fraction(25), engine_cost("classic"), FleetView(3, 2))


def test_the_slicer_reads_the_fleet_maximum_from_its_environment() -> None:
    env = {"AWS_REGION": "us-east-1", "WORK_BUCKET": WORK, "STATE_MACHINE_ARN": MACHINE}
    env["NOTIFICATION_TOPIC_ARN"] = TOPIC
    assert from_env(SlicerEnvironment, env).fleet_max_workers == 0
    assert from_env(SlicerEnvironment, {**env, "FLEET_MAX_WORKERS": "64"}).fleet_max_workers == 64


def test_a_job_keeps_two_rounds_of_the_fleet_in_flight_so_a_later_job_is_not_starved(twelve_seconds: Path) -> None:
    # GIVEN a fleet of at most 2 and of at most 64 (and the stack's own per-job limit of 1000)
    small, big = FakeOrchestrator(), FakeOrchestrator()
    plan_of(FakeStorage(), 2, twelve_seconds, small)
    plan_of(FakeStorage(), 64, twelve_seconds, big)
    # WHEN the jobs start THEN each job's Map keeps at most two segments per worker in flight
    ((small_input,),) = [tuple(small.executions.values())]
    ((big_input,),) = [tuple(big.executions.values())]
    assert small_input["limits"]["render_concurrency"] == fair_concurrency(2) == 4
    assert big_input["limits"]["render_concurrency"] == fair_concurrency(64) == 128
    assert small_input["job"]["fleet_workers"] == 2


def test_a_fixed_plan_keeps_the_stacks_per_job_limit(twelve_seconds: Path) -> None:
    orchestrator = FakeOrchestrator()
    plan_of(FakeStorage(), 0, twelve_seconds, orchestrator)
    ((execution_input,),) = [tuple(orchestrator.executions.values())]
    assert execution_input["limits"]["render_concurrency"] == 1000
    assert execution_input["job"]["fleet_workers"] == 0
