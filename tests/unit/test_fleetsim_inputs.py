"""The fleet simulation's inputs: each measured one agrees with the results file it names, the rest are estimates."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import occupancy
from benchmarks.fleet_overhead import calibration
from benchmarks.fleetsim.scenarios import COSTS, INPUTS, Estimate, Measured

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def test_every_input_is_measured_with_its_file_or_an_estimate_with_its_reason() -> None:
    for name, item in INPUTS.items():
        if isinstance(item, Measured):
            assert (RESULTS / item.file).is_file(), f"{name}: {item.file} is not in benchmarks/results"
            assert item.what, name
        else:
            assert isinstance(item, Estimate) and item.why, name


def test_the_fleet_overhead_inputs_are_what_their_file_measured() -> None:
    measured = {name: item for name, item in INPUTS.items() if isinstance(item, Measured)}
    from_overhead = {name: item for name, item in measured.items() if item.file.startswith("fleet-overhead")}
    assert from_overhead, "the simulation takes the farm's overhead from the fleet-overhead benchmark"
    for name, item in from_overhead.items():
        runs = json.loads((RESULTS / item.file).read_text())["runs"]
        assert calibration(runs)[item.what] == item.value, f"{name} differs from {item.file}"


def test_the_simulations_costs_are_built_from_the_inputs() -> None:
    assert COSTS.engine.overhead_s == INPUTS["per_segment_overhead_s"].value
    assert COSTS.dispatch_s == INPUTS["dispatch_s"].value
    assert COSTS.job_start_s == INPUTS["job_start_s"].value
    assert (COSTS.to_merge_s, COSTS.notice_s) == (INPUTS["to_merge_s"].value, INPUTS["notice_s"].value)


def test_the_1080p_overhead_is_what_the_occupancy_benchmark_measured() -> None:
    measured = {name: item for name, item in INPUTS.items() if isinstance(item, Measured)}
    from_occupancy = {name: item for name, item in measured.items() if item.file.startswith("occupancy")}
    assert "per_segment_overhead_s" in from_occupancy, "the headline's overhead is the 1080p one (issue 36)"
    for name, item in from_occupancy.items():
        clips = json.loads((RESULTS / item.file).read_text())["clips"]
        assert occupancy.calibration(clips)[item.what] == item.value, f"{name} differs from {item.file}"
