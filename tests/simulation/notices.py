"""A job's final notice (issue 43 item 4): the state machine's notice states, a cancel and the watchdog race.

The cancel (`Operations.cancel`) and the watchdog (`Watchdog.sweep`) are the real code. The state machine's
end (render.asl.json: SuccessNotice or FailureNotice, then ClaimSuccessNotice / ClaimFailureNotice, a
conditional create of the notice record, then the SNS publish with its retries) is modelled here, one
state a step: a stop that lands between two states ends it ABORTED; a claim that finds the record taken
ends it FAILED `NoticeNotClaimed`; a publish that keeps failing ends it FAILED with SNS's error, its notice
claimed and unsent. Step Functions itself does not die, so the model is never killed.

Invariants: never more than one final notice for the job; and once everything has settled (every party
run to its end, the watchdog's sweeps an hour later), exactly one.
"""

from __future__ import annotations

from datetime import timedelta
from functools import partial

from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from fusionfleet import layout
from fusionfleet.jobs.final_notice import NOTICE_NOT_CLAIMED_ERROR, NOTIFIED_FAILURE_ERROR, STATE_MACHINE, NoticeRecord
from fusionfleet.services.operations import Operations
from fusionfleet.services.watchdog import Watchdog
from tests.simulation.aws import stamp
from tests.simulation.farm import MACHINE, TOPIC, Farm
from tests.simulation.machines import MAX_ACTORS, STATS, FarmMachine, broken
from tests.support.jobs import WORK, watchdog_config

PUBLISH_FAILED = "SNS.InternalErrorException"  # how the publish task fails once its retries are spent


class FinalNotice(FarmMachine):
    @initialize()
    def job(self) -> None:
        """One job, sliced and started."""
        self.farm = Farm(faults=STATS.faults)
        submitted = self.farm.put_manifest(False)
        slicer = self.farm.scheduler.spawn(
            "slicer", submitted.key, self.farm.clock(), lambda: self.farm.slice(submitted.key)
        )
        self.farm.scheduler.finish(slicer)
        self.job_id = submitted.job_id
        self.arn = next(iter(self.farm.orchestrator.executions))
        self.state_machine_ended = False
        self.note("job started")

    # ------------------------------------------------------------------ the parties
    @precondition(lambda self: not self.state_machine_ended)
    @rule(succeeded=st.booleans(), publish_fails=st.booleans())
    def state_machine_notifies(self, succeeded: bool, publish_fails: bool) -> None:
        """The execution reaches its notice states (the merge done, or the job failed)."""
        self.state_machine_ended = True
        failing = ", publish fails" if publish_fails else ""
        self.note(f"state machine notifies {'success' if succeeded else 'failure'}{failing}")
        if publish_fails:
            STATS.faults["notice_publish_failed"] += 1
        self.farm.scheduler.spawn(
            "state machine", self.job_id, self.farm.clock(), lambda: self._notice_states(succeeded, publish_fails)
        )

    def _notice_states(self, succeeded: bool, publish_fails: bool) -> str:
        return notice_states(self.farm, self.arn, self.job_id, succeeded, publish_fails)

    @precondition(lambda self: len(self.farm.scheduler.live()) < MAX_ACTORS)
    @rule()
    def cancel(self) -> None:
        """The user cancels the job (`fusionfleet cancel`, `POST /jobs/{id}/cancel`)."""
        self.note("cancel")
        farm = self.farm
        operations = Operations(farm.storage, farm.orchestrator, farm.notifier, farm.resources, clock=farm.clock)
        farm.scheduler.spawn("cancel", self.job_id, farm.clock(), lambda: operations.cancel(self.job_id))

    @precondition(lambda self: len(self.farm.scheduler.live()) < MAX_ACTORS)
    @rule()
    def sweep(self) -> None:
        """The watchdog's sweep (a fresh Lambda: it remembers nothing of earlier sweeps)."""
        self.note("watchdog sweeps")
        farm = self.farm
        watchdog = Watchdog(farm.storage, farm.orchestrator, farm.notifier, watchdog_config(WORK, MACHINE, TOPIC))
        farm.scheduler.spawn("watchdog", self.job_id, farm.clock(), lambda: watchdog.sweep(stamp(farm.clock())))

    @rule()
    def settle(self) -> None:
        """Everything runs to its end, then the watchdog sweeps three times over the next hours: the job's
        notice must be out by then, exactly once."""
        self.note("settle")
        farm = self.farm
        for actor in farm.scheduler.live():
            farm.scheduler.finish(actor)
        for _ in range(3):
            farm.clock.advance(timedelta(hours=1).total_seconds())
            watchdog = Watchdog(farm.storage, farm.orchestrator, farm.notifier, watchdog_config(WORK, MACHINE, TOPIC))
            now = stamp(farm.clock())
            farm.scheduler.finish(
                farm.scheduler.spawn("watchdog", self.job_id, farm.clock(), partial(watchdog.sweep, now))
            )
        STATS.invariant_checks += 1
        sent = self._notices()
        if len(sent) != 1:
            raise broken(f"job {self.job_id} settled with {len(sent)} final notices: {sent}")

    def _notices(self) -> list[str]:
        return [
            f"{message.get('status')} by {message.get('notified_by')}"
            for _topic, _subject, message in self.farm.notifier.published
            if message.get("job_id") == self.job_id
        ]

    @invariant()
    def never_two_notices(self) -> None:
        STATS.invariant_checks += 1
        sent = self._notices()
        if len(sent) > 1:
            raise broken(f"job {self.job_id} got {len(sent)} final notices: {sent}")


def notice_states(farm: Farm, arn: str, job_id: str, succeeded: bool, publish_fails: bool = False,
                  cause: str | None = None) -> str:  # fmt: skip
    """The execution's end, one state a step (render.asl.json's notice states): a stop that lands between two
    states ends it; a claim that finds the record taken ends it FAILED NoticeNotClaimed; a publish that keeps
    failing ends it FAILED with SNS's error, its notice claimed and unsent. How it ended, in words."""
    orchestrator = farm.orchestrator
    execution = orchestrator.executions[arn]
    status = "succeeded" if succeeded else "failed"

    def state(name: str) -> bool:
        farm.scheduler.checkpoint(f"sfn.state {name}")
        return execution.status == "RUNNING"  # a stop lands between states

    if not state("SuccessNotice" if succeeded else "FailureNotice"):
        return "stopped"
    notice = {"status": status, "job_id": job_id, "tenant": "-", "notified_by": "state machine"}
    if cause is not None:
        notice["cause"] = cause
    execution.output = {"notice": notice}
    if not state("ClaimSuccessNotice" if succeeded else "ClaimFailureNotice"):
        return "stopped"
    claim = NoticeRecord(claimed_at=stamp(farm.clock()).isoformat(), by=STATE_MACHINE, status=status,
                         execution=execution.name)  # fmt: skip
    if not farm.storage.inner.create(WORK, layout.notice_key(job_id), claim.model_dump_json().encode()):
        orchestrator.end(arn, "FAILED", NOTICE_NOT_CLAIMED_ERROR)
        return "yielded"
    if not state("NotifySuccess" if succeeded else "NotifyFailure"):
        return "stopped"
    if publish_fails:
        orchestrator.end(arn, "FAILED", PUBLISH_FAILED)
        return "publish failed"
    farm.notifier.published.append((TOPIC, f"FusionFleet {job_id}", notice))
    orchestrator.end(arn, "SUCCEEDED" if succeeded else "FAILED", None if succeeded else NOTIFIED_FAILURE_ERROR)
    return "notified"
