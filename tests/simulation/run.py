"""Running schedules: N of them over the machines, one report, and a failure shrunk and replayable from its seed.

`make simulate N=… SEED=…` and the tests call `simulate`. Without a seed one is drawn and printed, so any
run can be replayed; `derandomize` (CI) takes the seed from the machine's own code instead.
"""

from __future__ import annotations

import itertools
import logging
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, cast

from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as use_seed
from hypothesis.reporting import with_reporter
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from fusionfleet.services import tenant_jobs
from gpu_worker.rendering import render
from tests.simulation import machines
from tests.simulation.machines import STATS, Admission, Profile, SubmitAndRead
from tests.simulation.notices import FinalNotice
from tests.simulation.workers import Workers

MACHINES: dict[str, type[RuleBasedStateMachine]] = {
    "submit_and_read": SubmitAndRead, "admission": Admission, "final_notice": FinalNotice, "workers": Workers,
}  # fmt: skip
INVARIANT_MARKER = "hypothesis_stateful_invariant"  # how Hypothesis marks an @invariant method
STEPS = 30  # rules in one schedule at most


@dataclass
class Violation:
    machine: str
    invariant: str  # what broke, as the invariant says it
    schedule: list[str]  # the shrunk schedule, as Hypothesis prints it (a program that replays it)
    found_after: int  # schedules run before the first failing one (shrinking not counted)

    def as_json(self) -> dict[str, Any]:
        return {"machine": self.machine, "invariant": self.invariant, "found_after": self.found_after,
                "schedule": self.schedule}  # fmt: skip


@dataclass
class Report:
    seed: int | None
    schedules: int = 0
    steps: int = 0
    invariant_checks: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    violations: list[Violation] = field(default_factory=list)
    fingerprints: dict[str, str] = field(default_factory=dict)  # per machine: the hash of every schedule run
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "schedules": self.schedules, "faults": dict(sorted(self.faults.items())),
            "invariant_checks": self.invariant_checks, "violations": [v.as_json() for v in self.violations],
            "seed": self.seed, "seconds": round(self.seconds, 2), "steps": self.steps,
            "outcomes": dict(sorted(self.outcomes.items())), "fingerprints": self.fingerprints,
        }  # fmt: skip


def simulate(
    schedules: int = 1000, seed: int | None = None, derandomize: bool = False,
    only: tuple[str, ...] = tuple(MACHINES), profile: Profile | None = None, shrink: bool = True,
) -> Report:  # fmt: skip
    """Run about `schedules` schedules, split evenly over the machines named in `only`."""
    if seed is None and not derandomize:
        seed = random.SystemRandom().randrange(2**32)
    report = Report(None if derandomize else seed)
    started = time.perf_counter()
    machines.PROFILE = profile or Profile()
    # The API's job ids end in random hex: counted instead, so a seed replays the same keys.
    counter = itertools.count()
    random_ids = tenant_jobs.new_job_id
    tenant_jobs.new_job_id = lambda now: f"{now:%Y%m%d-%H%M%S}-{next(counter):08x}"
    # The parties' warnings (a job stopped, a claim lost) are what fault schedules are made of, and so are a
    # worker's failed attempts (logged as errors): critical only.
    logging.disable(logging.ERROR)
    # The stand-in engine's segment is a few bytes, not a video: the probe (ffprobe) answers the planned count.
    probe = render._check_segment
    render._check_segment = lambda path, task: task.job.output_frames(task.segment)
    try:
        for name in only:
            _run_one(name, max(1, schedules // len(only)), seed, derandomize, shrink, report)
    finally:
        machines.PROFILE = Profile()
        tenant_jobs.new_job_id = random_ids
        render._check_segment = probe
        logging.disable(logging.NOTSET)
    report.seconds = time.perf_counter() - started
    return report


def _run_one(name: str, schedules: int, seed: int | None, derandomize: bool, shrink: bool, report: Report) -> None:
    machine = MACHINES[name]
    STATS.reset()

    def factory() -> RuleBasedStateMachine:
        return machine()

    # Hypothesis reads a stateful test's seed from its factory (run_state_machine_as_test copies it over).
    if seed is not None and not derandomize:
        use_seed(seed)(factory)
    chosen = settings(
        max_examples=schedules, stateful_step_count=STEPS, derandomize=derandomize, database=None, deadline=None,
        suppress_health_check=list(HealthCheck), report_multiple_bugs=False, print_blob=False,
        # Without shrinking a test only learns that an invariant broke, at the first failing schedule.
        phases=[Phase.explicit, Phase.generate, *([Phase.shrink] if shrink else [])],
    )  # fmt: skip
    try:
        with with_reporter(lambda _value: None):  # the schedule comes back on the exception's notes
            # A factory is what it takes (it is typed as the class); the seed rides on the factory.
            run_state_machine_as_test(cast("type[RuleBasedStateMachine]", factory), settings=chosen)
    except AssertionError as broken:
        report.violations.append(
            Violation(name, str(broken).splitlines()[0], _schedule(machine, broken), STATS.first_failure)
        )
    report.schedules += STATS.schedules
    report.steps += STATS.steps
    report.invariant_checks += STATS.invariant_checks
    report.faults.update(STATS.faults)
    report.outcomes.update(STATS.outcomes)
    report.fingerprints[name] = STATS.fingerprint


def _schedule(machine: type[RuleBasedStateMachine], broken: AssertionError) -> list[str]:
    """The shrunk schedule Hypothesis noted on the failure: its program, the invariant checks left out."""
    lines = [line for note in getattr(broken, "__notes__", []) for line in str(note).splitlines()]
    kept = []
    for line in lines:
        name = line.removeprefix("state.").split("(", 1)[0]
        checks = hasattr(getattr(machine, name, None), INVARIANT_MARKER) or name == "teardown"
        if line.startswith("state") and not checks:
            kept.append(line)
    return kept
