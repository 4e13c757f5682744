"""Fault injection: which rules match an attempt, where the rules come from, when a fault fires."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpu_worker.engines.base import EngineJob, Frame, Image
from gpu_worker.engines.copy import CopyEngine
from gpu_worker.rendering.faults import Fault, FaultyEngine, InjectedFailure, load, matching

JOB = "interview-0123456789abcdef"


def test_a_rule_matches_by_job_substring_segment_and_attempt() -> None:
    rules = [{"job": "interview", "segment": 3, "attempt": 1, "action": "crash", "at_frame": 20}]
    assert matching(rules, JOB, 3, 1) == [Fault("crash", at_frame=20)]
    assert matching(rules, JOB, 3, 2) == []
    assert matching(rules, JOB, 4, 1) == []
    assert matching(rules, "other-job", 3, 1) == []


def test_a_rule_can_slow_only_the_original_copy_of_a_segment() -> None:
    # (what the straggler test uses: the backup copy of the same attempt number renders at full speed)
    rules = [{"segment": 1, "copy": 0, "action": "slow", "seconds": 60}]
    assert matching(rules, JOB, 1, 1) == [Fault("slow", seconds=60)]
    assert matching(rules, JOB, 1, 1, copy=1) == []


def test_fields_left_out_match_everything_and_unknown_actions_nothing() -> None:
    rules: list[dict[str, Any]] = [
        {"action": "slow", "seconds": 1.5},
        {"action": "leak", "megabytes": 200, "at_frame": 5},
        {"action": "explode"},
        {"job": "interview"},
    ]
    assert matching(rules, JOB, 0, 7) == [Fault("slow", seconds=1.5), Fault("leak", at_frame=5, megabytes=200)]


def test_probability_is_seeded_so_a_run_can_be_repeated() -> None:
    rules = [{"action": "fail", "probability": 0.5}]
    chosen = [bool(matching(rules, JOB, segment, 1)) for segment in range(40)]
    assert chosen == [bool(matching(rules, JOB, segment, 1)) for segment in range(40)]
    assert 0 < sum(chosen) < 40
    assert matching([{"action": "fail", "probability": 0.0}], JOB, 0, 1) == []


def test_no_file_means_no_faults_and_a_bad_file_is_ignored(tmp_path: Path) -> None:
    assert load(None, JOB, 0, 1) == []
    assert load(tmp_path / "absent.json", JOB, 0, 1) == []
    broken = tmp_path / "broken.json"
    broken.write_text("[{")
    assert load(broken, JOB, 0, 1) == []
    not_a_list = tmp_path / "object.json"
    not_a_list.write_text('{"action": "crash"}')
    assert load(not_a_list, JOB, 0, 1) == []
    empty = tmp_path / "empty.json"
    empty.write_text("")
    assert load(empty, JOB, 0, 1) == []


def test_the_rules_file_is_read_again_for_every_task(tmp_path: Path) -> None:
    # GIVEN a rules file with no rules
    rules = tmp_path / "faults.json"
    rules.write_text("[]")
    assert load(rules, JOB, 0, 1) == []
    # WHEN a rule is added while the worker runs
    rules.write_text(json.dumps([{"segment": 0, "action": "fail", "at_frame": 3}]))
    # THEN the next task gets it
    assert load(rules, JOB, 0, 1) == [Fault("fail", at_frame=3)]


class PassThrough(CopyEngine):
    """The copy engine, noting each frame it is given."""

    name = "pass"

    def __init__(self) -> None:
        self.pulled: list[int] = []

    def render(self, job: EngineJob, frames: Iterable[Frame]) -> Iterator[Image]:
        for frame in frames:
            self.pulled.append(frame.index)
            yield frame.image


def frames(first: int, end: int, lead_in: int = 0) -> Iterator[Frame]:
    image = np.zeros((2, 2, 3), dtype=np.uint8)
    for index in range(first - lead_in, end):
        yield Frame(index=index, image=image, emit=index >= first)


def test_a_fault_fires_when_the_engine_pulls_its_frame_of_the_segment() -> None:
    # GIVEN segment frames 100-109 with two lead-in frames, and a failure at the segment's frame 4
    engine = PassThrough()
    faulty = FaultyEngine(engine, [Fault("fail", at_frame=4)], segment_start=100)
    outputs = faulty.render(EngineJob(JOB, ()), frames(100, 110, lead_in=2))
    # WHEN the engine renders
    with pytest.raises(InjectedFailure):
        list(outputs)
    # THEN it got the lead-in and the segment's first four frames, and failed on pulling frame 104
    assert engine.pulled == [98, 99, 100, 101, 102, 103]
    assert faulty.name == "pass"


def test_a_zero_second_slow_fault_changes_nothing() -> None:
    engine = PassThrough()
    faulty = FaultyEngine(engine, [Fault("slow", at_frame=0, seconds=0.0)], segment_start=0)
    assert len(list(faulty.render(EngineJob(JOB, ()), frames(0, 5)))) == 5
