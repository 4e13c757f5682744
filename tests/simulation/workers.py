"""Workers' message handling (issue 43 item 2): render workers take a job's segment messages and see them to their end.

One job, sliced by the real slicer and started; its Map sends one message per segment with a task token
(`SimStepFunctions.issue_token`), the second one late in some schedules. Rules start workers (the real
loop and render handler, the engine stood in: tests.simulation.fleet) whose render ends as the rule chose
(frames, an engine error, an engine error for good); step, kill and stall them call by call; move the
clock past the visibility timeout (a stalled worker's message lapses and a second worker takes it); make
SQS deliver an in-flight message twice; cancel the job (`Operations.cancel`); run the dead-letter
Lambda's real `fail_dead_letter` on what SQS redrove.

Invariants, after every step: a segment's committed output (its winner record and the bytes it names)
never changes once committed, and the result Step Functions took for its token names it; a token is
answered at most once; a worker that took a message after the job's cancel had ended starts no render of
it; never two final notices. At the end, with no more faults (every party runs to its end, workers
drain the queue, the dead-letter Lambda runs, the execution reaches its notice states, the watchdog
sweeps): every segment rendered or the job failed with its cause (a worker's or the dead-letter
Lambda's) or cancelled, no token left waiting with no message to answer it, and exactly one final notice.
"""

from __future__ import annotations

from datetime import timedelta
from functools import partial
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from fusionfleet import layout
from fusionfleet.adapters.storage import get_json
from fusionfleet.errors import ObjectMissing
from fusionfleet.jobs.plan import Segment
from fusionfleet.messages import JobContext, RenderTask
from fusionfleet.services.deadletter import fail_dead_letter
from fusionfleet.services.operations import Operations
from fusionfleet.services.watchdog import Watchdog
from tests.simulation.aws import stamp
from tests.simulation.farm import MACHINE, TOPIC, Farm
from tests.simulation.fleet import OUTCOMES, VISIBILITY_S, SimWorker, StandInRenderer
from tests.simulation.machines import MAX_ACTORS, PICK, STATS, FarmMachine, broken
from tests.simulation.notices import notice_states
from tests.simulation.sqs import SimQueue
from tests.support.jobs import WORK, watchdog_config

QUEUE, DLQ = "render-normal", "render-dlq"
# The calls a worker is killed before by `worker_dies_at`: its queue and token actions, its commit and upload.
DYING_CALLS = ("sqs.delete", "sqs.change_visibility", "sfn.task_success", "sfn.task_failure", "sfn.heartbeat",
               f"s3.upload {WORK}", f"s3.create {WORK}", "engine renders")  # fmt: skip
MAX_RECEIVES = 3  # the render queues' redrive maxReceiveCount (RetryPolicy's max_attempts)


class Workers(FarmMachine):
    @initialize(late=st.sampled_from([0.0, 0.0, 30.0, 90.0]))
    def job(self, late: float) -> None:
        """One job, sliced and started; its Map sends a message per segment (the second `late` seconds late)."""
        self.farm = Farm(faults=STATS.faults)
        farm = self.farm
        self.queue = SimQueue(farm.scheduler, farm.clock, STATS.faults)
        self.queue.create(DLQ)
        self.queue.create(QUEUE, MAX_RECEIVES, DLQ)
        submitted = farm.put_manifest(False)
        slicer = farm.scheduler.spawn("slicer", submitted.key, farm.clock(), partial(farm.slice, submitted.key))
        farm.scheduler.finish(slicer)
        self.job_id = submitted.job_id
        self.arn = next(iter(farm.orchestrator.executions))
        context = JobContext.model_validate(farm.orchestrator.executions[self.arn].payload["job"])
        plan = [Segment.from_dict(item) for item in farm.storage.inner.json(WORK, layout.plan_key(self.job_id))]
        self.tokens: list[str] = []
        for segment in plan:
            token = farm.orchestrator.issue_token(self.arn, segment.index)
            self.tokens.append(token)
            task = RenderTask(task_token=token, job=context, segment=segment)
            self.queue.send(QUEUE, task.wire_json(), delay_s=late if segment.index else 0.0)
        self.workers: list[SimWorker] = []
        self.committed: dict[int, tuple[bytes, bytes]] = {}  # segment: (its winner record, its output's bytes)
        self.cancelled_at: int | None = None  # the actor count when a cancel had ended: workers after it
        self.concluded = False
        self.note(f"job started, its segments sent (the second {late:g}s late)")

    # ------------------------------------------------------------------ the parties
    @precondition(lambda self: len(self.farm.scheduler.live()) < MAX_ACTORS)
    @rule(outcome=st.sampled_from(OUTCOMES))
    def worker(self, outcome: str) -> None:
        """A render worker takes the next message and works on it; its render ends as `outcome` says."""
        farm = self.farm
        name = f"w{len(self.workers)}"
        renderer = StandInRenderer(name, farm.storage, farm.scheduler, outcome)
        worker = SimWorker(name, QUEUE, renderer, self.queue, farm.orchestrator, farm.storage, farm.clock)
        self.workers.append(worker)
        if outcome != "frames":
            STATS.faults[outcome.replace(" ", "_")] += 1
        self.note(f"worker {name} starts (its render: {outcome})")
        farm.scheduler.spawn("worker", name, farm.clock(), worker.take_one)
        worker.cancelled_before = self.cancelled_at is not None

    @precondition(lambda self: self.kills and self.farm.scheduler.live("worker"))
    @rule(which=PICK, call=st.sampled_from(DYING_CALLS))
    def worker_dies_at(self, which: int, call: str) -> None:
        """A worker runs on to its next call of this kind and dies before it (kill -9, a lost host): every
        queue and token action is a step where a worker may die, and a schedule reaches each directly."""
        actor = self.pick(self.farm.scheduler.live("worker"), which)
        scheduler = self.farm.scheduler
        while actor.live and not actor.next_call.startswith(call):
            scheduler.step(actor)
        if actor.live:
            self.note(f"worker#{actor.actor_id} dies before {actor.next_call}")
            STATS.faults["party_killed"] += 1
            scheduler.kill(actor)

    @precondition(lambda self: self.kills and self.farm.scheduler.live())
    @rule(which=PICK, odds=st.integers(min_value=0, max_value=3))
    def kill(self, which: int, odds: int) -> None:
        """As FarmMachine.kill, except a cancel that has published its notice: dying before it records that,
        it leaves the watchdog to send a second notice, a race of the notice protocol's own (open, see
        docs/simulation.md, `test_a_cancel_that_dies_after_its_publish_gets_a_second_notice`) that would end
        every long run here; the final_notice machine is where that protocol is searched."""
        actor = self.pick(self.farm.scheduler.live(), which)
        if actor.kind == "cancel" and self._notices():
            return
        super().kill(which, odds)

    @rule(which=PICK)
    def duplicate(self, which: int) -> None:
        """SQS delivers a message in flight again (at-least-once): a second worker may take it beside the first."""
        if self.queue.duplicate(QUEUE, which) is not None:
            self.note("sqs delivers an in-flight message again")

    @precondition(lambda self: self.queue.pending(DLQ) and len(self.farm.scheduler.live()) < MAX_ACTORS)
    @rule()
    def dead_letters(self) -> None:
        """The dead-letter queue's Lambda fails the token of a task SQS redrove there."""
        self.note("dead-letter lambda runs")
        self.farm.scheduler.spawn("dlq", DLQ, self.farm.clock(), self._dead_letters)

    def _dead_letters(self) -> int:
        handled = 0
        for message in self.queue.receive(DLQ, 0, 30, max_messages=10):
            fail_dead_letter(message.body, MAX_RECEIVES, self.farm.storage, self.farm.orchestrator)
            self.queue.delete(message)
            handled += 1
        return handled

    @precondition(lambda self: not self.farm.scheduler.live("cancel") and len(self.farm.scheduler.live()) < MAX_ACTORS)
    @rule()
    def cancel(self) -> None:
        """The user cancels the job (again only once an earlier cancel has ended or died)."""
        self.note("cancel")
        farm = self.farm
        operations = Operations(farm.storage, farm.orchestrator, farm.notifier, farm.resources, clock=farm.clock)
        farm.scheduler.spawn("cancel", self.job_id, farm.clock(), partial(operations.cancel, self.job_id))

    # ------------------------------------------------------------------ invariants
    def _winner(self, index: int) -> tuple[bytes, dict[str, Any]] | None:
        inner = self.farm.storage.inner
        key = layout.segment_winner_key(self.job_id, index, 0)
        if not inner.exists(WORK, key):
            return None
        return inner.get_bytes(WORK, key), get_json(inner, WORK, key)

    @invariant()
    def committed_output_never_changes(self) -> None:
        STATS.invariant_checks += 1
        inner = self.farm.storage.inner
        for index in range(len(self.tokens)):
            found = self._winner(index)
            if found is None:
                continue
            raw, record = found
            try:
                output = inner.get_bytes(WORK, record["key"])
            except ObjectMissing:
                output = b"(missing)"
            first = self.committed.setdefault(index, (raw, output))
            if first != (raw, output):
                what = "its winner record" if first[0] != raw else f"the bytes of {record['key']}"
                raise broken(f"segment {index} committed twice: {what} changed after its commit "
                             f"({first[1]!r} then {output!r})")  # fmt: skip

    @invariant()
    def tokens_answered_once_with_the_committed_output(self) -> None:
        STATS.invariant_checks += 1
        for token in self.tokens:
            found = self.farm.orchestrator.tokens[token]
            if found.answers > 1:
                raise broken(f"token of segment {found.index} answered {found.answers} times")
            if found.state == "succeeded" and found.output is not None:
                winner = self._winner(found.index)
                key = winner[1]["key"] if winner else None
                if found.output.get("key") != key:
                    raise broken(f"segment {found.index}: Step Functions took {found.output.get('key')!r}, "
                                 f"the committed output is {key!r}")  # fmt: skip

    @invariant()
    def a_cancelled_job_starts_no_segment(self) -> None:
        STATS.invariant_checks += 1
        for worker in self.workers:
            took_after = worker.took is not None and worker.cancelled_before
            if took_after and worker.renderer.started:
                raise broken(f"worker {worker.name} took a segment of the cancelled job after its cancel and "
                             f"rendered it: {worker.renderer.started}")  # fmt: skip
        if self.cancelled_at is None and any(
            a.kind == "cancel" and a.state == "done" for a in self.farm.scheduler.actors
        ):
            self.cancelled_at = len(self.farm.scheduler.actors)

    def _notices(self) -> list[str]:
        return [f"{m.get('status')} by {m.get('notified_by')}" for _t, _s, m in self.farm.notifier.published
                if m.get("job_id") == self.job_id]  # fmt: skip

    @invariant()
    def never_two_notices(self) -> None:
        STATS.invariant_checks += 1
        if len(self._notices()) > 1:
            raise broken(f"job {self.job_id} got {len(self._notices())} final notices: {self._notices()}")

    # ------------------------------------------------------------------ the end of a schedule
    failed = False

    def teardown(self) -> None:
        try:
            if not self.failed and hasattr(self, "tokens"):
                self.everything_ends()
        finally:
            super().teardown()

    def everything_ends(self) -> None:
        """Liveness: with no more faults, the parties the stack runs anyway run until nothing moves; then every
        segment is rendered, or the job failed with its cause, or it was cancelled; and one notice went out."""
        farm, scheduler = self.farm, self.farm.scheduler
        for actor in scheduler.live():
            scheduler.finish(actor)
        for _round in range(12):
            farm.clock.advance(VISIBILITY_S + 61.0)  # what a dead worker held is visible again, backoffs spent
            if self.queue.pending(DLQ):
                scheduler.finish(scheduler.spawn("dlq", DLQ, farm.clock(), self._dead_letters))
            for _ in range(len(self.queue.pending(QUEUE))):
                renderer = StandInRenderer(f"w{len(self.workers)}", farm.storage, scheduler, "frames")
                worker = SimWorker(renderer.worker_name, QUEUE, renderer, self.queue, farm.orchestrator,
                                   farm.storage, farm.clock)  # fmt: skip
                worker.cancelled_before = self.cancelled_at is not None
                self.workers.append(worker)
                scheduler.finish(scheduler.spawn("worker", worker.name, farm.clock(), worker.take_one))
            self._check_all()
        self.every_segment_ends()
        self._conclude()
        for _ in range(3):
            farm.clock.advance(timedelta(hours=1).total_seconds())
            watchdog = Watchdog(farm.storage, farm.orchestrator, farm.notifier, watchdog_config(WORK, MACHINE, TOPIC))
            scheduler.finish(scheduler.spawn("watchdog", self.job_id, farm.clock(),
                                             partial(watchdog.sweep, stamp(farm.clock()))))  # fmt: skip
        STATS.invariant_checks += 1
        if len(self._notices()) != 1:
            raise broken(f"job {self.job_id} ended with {len(self._notices())} final notices: {self._notices()}")

    def every_segment_ends(self) -> None:
        """Once the workers have drained the queues: each segment's token succeeded, or the job's Map failed with
        a cause, or the job was cancelled. Not later: the watchdog would end a job whose segment was lost too,
        as stalled, and that is not the segment's own end."""
        STATS.invariant_checks += 1
        farm = self.farm
        execution = farm.orchestrator.executions[self.arn]
        if execution.map_error is not None:
            if not execution.map_error[1]:
                raise broken(f"job failed without a cause: {execution.map_error}")
            return
        if execution.status == "ABORTED":
            return  # stopped by a cancel (nothing else stops it before this check), whether or not it lived to
            # write its marker: the segments' tokens are gone, and a worker that takes one drops it
        left = [f"{m.receive_count} receives" for m in self.queue.pending(QUEUE) + self.queue.pending(DLQ)]
        for token in self.tokens:
            found = farm.orchestrator.tokens[token]
            if found.state != "succeeded":
                raise broken(
                    f"segment {found.index} neither rendered nor failed with a cause: its token {found.state}, "
                    f"execution {execution.status}, messages left: {left or 'none'}"
                )

    def _check_all(self) -> None:
        self.committed_output_never_changes()
        self.tokens_answered_once_with_the_committed_output()
        self.a_cancelled_job_starts_no_segment()
        self.never_two_notices()

    def _conclude(self) -> None:
        """The Map ended (every token answered, or one failed): the execution goes on to its notice."""
        farm = self.farm
        execution = farm.orchestrator.executions[self.arn]
        states = {farm.orchestrator.tokens[token].state for token in self.tokens}
        if execution.status != "RUNNING" or "waiting" in states:
            return
        self.concluded = True
        failed = execution.map_error
        scheduler = farm.scheduler
        ends = partial(notice_states, farm, self.arn, self.job_id, failed is None, False, failed and failed[1])
        scheduler.finish(scheduler.spawn("state machine", self.job_id, farm.clock(), ends))
