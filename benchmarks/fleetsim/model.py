"""A discrete-event model of the farm (SimPy): jobs → plans → priority queues → GPU workers → merge.

It runs the project's own decisions, not copies of them: `fusionfleet.jobs.sizing` cuts every job (or the
fixed 4 s plan, for comparison) and `fusionfleet.fleet.autoscale.decide` sizes the fleet. What it models:
a job's fixed start (slicer, Step Functions' first dispatch) and its segments' dispatch rate; one
priority queue that a worker reads high first; each segment costing the engine's time per frame
plus a fixed overhead on the worker (the GPU idles during it); workers that take `boot_s` to come
and are billed from request to stop; scale-in stopping idle workers only; Spot interruptions that
put a segment back (its progress lost); the merge; workers that take their next segment while one
renders (gpu_worker.delivery.lookahead), which skips that segment's part of the overhead spent before its engine
starts, and finish a segment (upload, commit, report) while the engine renders the next.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import simpy

from fusionfleet.fleet.autoscale import Backlog, ScalingPolicy, ScalingState, decide
from fusionfleet.fleet.fairness import fair_concurrency
from fusionfleet.jobs.sizing import FleetView, WorkCost, fixed_segment_count, sized_segment_count

PRIORITY_RANK = {"high": 0, "normal": 1, "low": 2}


@dataclass(frozen=True)
class JobSpec:
    name: str
    submit_s: float
    frames: int
    fps: int
    priority: str


@dataclass(frozen=True)
class Costs:
    """Seconds. Which of these were measured is said where they are built (scenarios.py)."""

    engine: WorkCost
    job_start_s: float  # submit → first segment dispatched (slicer, StartExecution, Map start)
    dispatch_s: float  # between two segments of one job being sent
    merge_base_s: float
    merge_per_segment_s: float
    # The part of the engine's per-segment overhead spent before the engine starts (receive, token,
    # records): what a segment taken early, while its predecessor renders, no longer waits for.
    head_s: float = 0.0
    # The part spent after the engine's last frame (join, check, upload, commit, callback, delete):
    # what a worker that looks ahead finishes in the background while its engine renders the next.
    tail_s: float = 0.0
    # Last segment done → merge taken (callbacks, the Map's close, the merge's dispatch), and merge done →
    # the client holds the job's notice (the success state, SNS, the client's queue).
    to_merge_s: float = 0.0
    notice_s: float = 0.0


@dataclass(frozen=True)
class FleetConfig:
    fixed_workers: int = 0  # > 0: a fixed fleet, no autoscaling
    policy: ScalingPolicy | None = None
    scale_every_s: float = 60.0
    boot_s: float = 180.0
    spot_interruptions_per_hour: float = 0.0
    adaptive_segments: bool = True
    fairness: bool = False  # each job's segments in flight capped at fusionfleet.fleet.fairness's share
    # Slow hosts (a throttled GPU, a noisy neighbour): this share of workers renders this much slower.
    slow_share: float = 0.0
    slow_factor: float = 3.0
    # Backup copies (MapReduce's backup tasks): once this share of a job's segments is done, a segment
    # running longer than k × the median of its done ones gets a second copy, queued first; the first
    # copy to finish wins and the other stops (its token closes).
    backups: bool = False
    backup_k: float = 1.5
    backup_after_share: float = 0.9
    # gpu_worker.delivery.lookahead: a worker takes its next segment as one starts when at least this many
    # wait (0: off).
    lookahead_min_backlog: int = 0


@dataclass
class Segment:
    job: str
    index: int
    frames: int
    priority: str
    queued_at: float = 0.0
    backup: bool = False


@dataclass
class JobResult:
    spec: JobSpec
    segments: int
    first_start_s: float = math.inf
    last_end_s: float = 0.0
    done_s: float = 0.0
    waits: list[float] = field(default_factory=list)


@dataclass
class Totals:
    billed_s: float = 0.0
    engine_s: float = 0.0
    overhead_s: float = 0.0
    interruptions: int = 0
    backups: int = 0
    backups_won: int = 0
    fleet_samples: list[tuple[float, int, int]] = field(default_factory=list)  # (t, running, desired)


class Farm:
    def __init__(self, costs: Costs, fleet: FleetConfig, seed: int = 1) -> None:
        self.env = simpy.Environment()
        self.costs = costs
        self.fleet = fleet
        self.random = random.Random(seed)
        self.queue = simpy.PriorityStore(self.env)
        self.results: dict[str, JobResult] = {}
        self.remaining: dict[str, int] = {}
        self.totals = Totals()
        self.workers: list[Worker] = []
        self.in_flight = 0
        self._order = itertools.count()
        self.maximum = fleet.fixed_workers or (fleet.policy.maximum if fleet.policy else 1)
        self.finished: dict[tuple[str, int], simpy.Event] = {}
        self.started: dict[tuple[str, int], float] = {}
        self.durations: dict[str, list[float]] = {}
        self.backed_up: set[tuple[str, int]] = set()
        self.slots: dict[tuple[str, int], Any] = {}
        self.plan_frames: dict[tuple[str, int], int] = {}

    # ------------------------------------------------------------------ jobs
    def submit(self, spec: JobSpec) -> None:
        self.env.process(self._job(spec))

    def plan(self, spec: JobSpec) -> list[int]:
        fps = Fraction(spec.fps)
        if self.fleet.adaptive_segments:
            count = sized_segment_count(spec.frames, fps, self.costs.engine, FleetView(self.running(), self.maximum))
        else:
            count = fixed_segment_count(spec.frames, fps)
        count = min(count, spec.frames)
        base, extra = divmod(spec.frames, count)
        return [base + (1 if i < extra else 0) for i in range(count)]

    def _job(self, spec: JobSpec) -> Generator[Any, Any, None]:
        yield self.env.timeout(max(0.0, spec.submit_s - self.env.now))
        plan = self.plan(spec)
        self.results[spec.name] = JobResult(spec, len(plan))
        self.remaining[spec.name] = len(plan)
        self.durations[spec.name] = []
        for index in range(len(plan)):
            self.finished[(spec.name, index)] = self.env.event()
        if self.fleet.backups:
            self.env.process(self._straggler_watch(spec.name, len(plan)))
        yield self.env.timeout(self.costs.job_start_s)
        # The Map's MaxConcurrency: unbounded without fairness, else the job's fair share of the fleet.
        cap = fair_concurrency(self.maximum) if self.fleet.fairness else len(plan)
        slots = simpy.Resource(self.env, capacity=cap)
        for index, frames in enumerate(plan):
            slot = slots.request()
            yield slot
            segment = Segment(spec.name, index, frames, spec.priority)
            self.slots[(spec.name, index)] = (slots, slot)
            self.plan_frames[(spec.name, index)] = frames
            self.enqueue(segment)
            yield self.env.timeout(self.costs.dispatch_s)

    def enqueue(self, segment: Segment) -> None:
        segment.queued_at = self.env.now
        self.requeue(segment)

    def requeue(self, segment: Segment) -> None:
        """Back in the queue, its wait still counted from when it was first queued."""
        rank = PRIORITY_RANK[segment.priority]
        self.queue.put(simpy.PriorityItem((rank, next(self._order)), segment))

    def _straggler_watch(self, job: str, total: int) -> Generator[Any, Any, None]:
        while self.remaining[job] > 0:
            yield self.env.timeout(1.0)
            done = self.durations[job]
            if len(done) < self.fleet.backup_after_share * total:
                continue
            median = sorted(done)[len(done) // 2]
            for (name, index), began in list(self.started.items()):
                key = (name, index)
                if name != job or key in self.backed_up or self.finished[key].triggered:
                    continue
                if self.env.now - began > self.fleet.backup_k * median:
                    self.backed_up.add(key)
                    self.totals.backups += 1
                    frames = self.plan_frames[key]
                    copy = Segment(job, index, frames, self.results[job].spec.priority, backup=True)
                    copy.queued_at = self.env.now
                    self.queue.put(simpy.PriorityItem((-1, next(self._order)), copy))

    def segment_done(self, segment: Segment, took_s: float) -> None:
        key = (segment.job, segment.index)
        self.finished[key].succeed()
        self.durations[segment.job].append(took_s)
        self.started.pop(key, None)
        if segment.backup:
            self.totals.backups_won += 1
        result = self.results[segment.job]
        slots, slot = self.slots[key]
        slots.release(slot)
        result.last_end_s = max(result.last_end_s, self.env.now)
        self.remaining[segment.job] -= 1
        if self.remaining[segment.job] == 0:
            self.env.process(self._merge(result))

    def _merge(self, result: JobResult) -> Generator[Any, Any, None]:
        yield self.env.timeout(
            self.costs.to_merge_s + self.costs.merge_base_s + self.costs.merge_per_segment_s * result.segments
        )
        yield self.env.timeout(self.costs.notice_s)
        result.done_s = self.env.now

    # ------------------------------------------------------------------ fleet
    def running(self) -> int:
        return sum(1 for w in self.workers if not w.retired)

    def add_worker(self) -> None:
        worker = Worker(self, len(self.workers))
        self.workers.append(worker)
        worker.process = self.env.process(worker.run())

    def start_fleet(self) -> None:
        if self.fleet.fixed_workers:
            for _ in range(self.fleet.fixed_workers):
                self.add_worker()
            for worker in self.workers:
                worker.ready_at = 0.0
            return
        assert self.fleet.policy is not None
        for _ in range(self.fleet.policy.minimum):
            self.add_worker()
        self.env.process(self._autoscaler(self.fleet.policy))

    def _autoscaler(self, policy: ScalingPolicy) -> Generator[Any, Any, None]:
        state = ScalingState(desired=policy.minimum)
        while True:
            backlog = Backlog(waiting=len(self.queue.items), in_flight=self.in_flight)
            decision = decide(backlog, state, policy, self.env.now)
            state = decision.state_after(state, self.env.now)
            live = [w for w in self.workers if not w.retired]
            for _ in range(decision.desired - len(live)):
                self.add_worker()
            surplus = len(live) - decision.desired
            for worker in [w for w in live if w.idle][: max(0, surplus)]:
                worker.retire()
            self.totals.fleet_samples.append((self.env.now, self.running(), decision.desired))
            yield self.env.timeout(self.fleet.scale_every_s)

    def billed_until(self, end_s: float) -> float:
        return sum((w.stopped_at if w.stopped_at is not None else end_s) - w.started_at for w in self.workers)

    def run(self, jobs: Sequence[JobSpec], until_s: float | None = None) -> None:
        self.start_fleet()
        for spec in jobs:
            self.submit(spec)
        if until_s is not None:
            self.env.run(until=until_s)
            return
        while len(self.results) < len(jobs) or any(r.done_s == 0.0 for r in self.results.values()):
            self.env.step()


class Worker:
    def __init__(self, farm: Farm, number: int) -> None:
        self.farm = farm
        self.number = number
        self.started_at = farm.env.now
        self.ready_at = farm.env.now + farm.fleet.boot_s
        self.stopped_at: float | None = None
        self.retired = False
        self.idle = False
        self._retire = farm.env.event()
        self.process: simpy.Process | None = None
        self.speed = farm.fleet.slow_factor if farm.random.random() < farm.fleet.slow_share else 1.0
        self.held: Segment | None = None  # taken early, while the segment before it rendered

    def retire(self) -> None:
        self.retired = True
        if not self._retire.triggered:
            self._retire.succeed()

    def run(self) -> Generator[Any, Any, None]:
        env, farm = self.farm.env, self.farm
        yield env.timeout(max(0.0, self.ready_at - env.now))
        while not self.retired:
            if self.held is not None and self._outranked(self.held):
                farm.requeue(self.held)  # gives way to higher-priority work, as the worker does
                self.held = None
            early = self.held is not None
            if self.held is not None:
                segment, self.held = self.held, None
            else:
                self.idle = True
                request = farm.queue.get()
                fired = yield request | self._retire
                self.idle = False
                if request not in fired:
                    request.cancel()
                    break
                item = request.value
                assert isinstance(item, simpy.PriorityItem)
                segment = item.item
            key = (segment.job, segment.index)
            if farm.finished[key].triggered:
                continue  # a copy of a segment another copy already finished
            farm.in_flight += 1
            began = env.now
            farm.started.setdefault(key, began)
            result = farm.results[segment.job]
            result.first_start_s = min(result.first_start_s, env.now)
            result.waits.append(env.now - segment.queued_at)
            cost = farm.costs.engine
            head = farm.costs.head_s if early else 0.0
            # With lookahead on, the segment's finish runs beside the next segment's render.
            tail = farm.costs.tail_s if farm.fleet.lookahead_min_backlog > 0 else 0.0
            work = (cost.fixed_s() - head - tail + segment.frames * cost.seconds_per_frame) * self.speed
            self._look_ahead()
            interrupted_after = self._interruption()
            if interrupted_after is not None and interrupted_after < work:
                yield env.timeout(interrupted_after)
                farm.in_flight -= 1
                farm.totals.interruptions += 1
                farm.started.pop(key, None)
                farm.enqueue(segment)  # another worker redoes it; this host is gone
                if self.held is not None:
                    farm.enqueue(self.held)
                    self.held = None
                self.retired = True
                farm.add_worker()  # the service replaces the task (it boots again)
                break
            rendered = env.timeout(work)
            fired = yield rendered | farm.finished[key]
            farm.in_flight -= 1
            share = 1.0 if rendered in fired else (env.now - began) / work
            farm.totals.engine_s += (segment.frames + cost.lead_in_frames) * cost.seconds_per_frame * share
            farm.totals.overhead_s += (cost.overhead_s - head - tail) * share
            if rendered in fired and not farm.finished[key].triggered:
                if tail > 0:
                    env.process(self._finish(segment, began, tail))
                else:
                    farm.segment_done(segment, env.now - began)
            # else: the other copy won; this one stops as its token closes
        self.stopped_at = env.now

    def _finish(self, segment: Segment, began: float, tail: float) -> Generator[Any, Any, None]:
        """The segment's finish, in the background: it counts as done once uploaded and reported."""
        yield self.farm.env.timeout(tail)
        if not self.farm.finished[(segment.job, segment.index)].triggered:
            self.farm.segment_done(segment, self.farm.env.now - began)

    def _outranked(self, held: Segment) -> bool:
        items = self.farm.queue.items
        return bool(items) and items[0].priority[0] < PRIORITY_RANK[held.priority]

    def _look_ahead(self) -> None:
        """Take the next segment now when the backlog is deep enough (it is there: no time passes)."""
        queue, threshold = self.farm.queue, self.farm.fleet.lookahead_min_backlog
        if threshold <= 0 or len(queue.items) < threshold:
            return
        item = heapq.heappop(queue.items)  # the store keeps its items as a heap
        assert isinstance(item, simpy.PriorityItem)
        self.held = item.item

    def _interruption(self) -> float | None:
        rate = self.farm.fleet.spot_interruptions_per_hour
        if rate <= 0:
            return None
        return self.farm.random.expovariate(rate / 3600.0)
