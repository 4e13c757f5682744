"""The schedules: Hypothesis state machines whose rules start parties, step them call by call, and inject faults.

`SubmitAndRead` (issue 43 item 2): jobs and batches submitted by the CLI and by the tenant API, their
manifests' events delivered to the slicer (twice, late, or to a slicer killed half-way), and the CLI's and
the API's readers interleaved at any call. Invariant: an id the CLI printed or the API answered never reads
as "not found" (nor fails to read at all).

`Admission` (item 3): a tenant with a job limit; slicers queue its jobs and admit, the watchdog and the
notice follower admit at the same time, executions end (a follower admits then), listing lags, parties
die holding the lease; with retries, a retry from the CLI, the API or a batch queues the run and admits
too. Invariant: the tenant never has more executions running than its limit.

Each rule is one step of the schedule; Hypothesis chooses the rules and their arguments, shrinks a
failing schedule to a shortest one, and replays it from its seed. Counters for the run's report live in
`STATS`; a schedule's trace is hashed into `STATS.fingerprint`, so two runs of one seed can be compared.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from fusionfleet import layout
from fusionfleet.adapters.orchestrator import execution_arn
from fusionfleet.errors import JobNotFound
from fusionfleet.jobs.batches import open_batches
from fusionfleet.jobs.ids import TENANT_SEPARATOR, batch_of_item, item_id
from fusionfleet.jobs.runs import parse_execution_name
from fusionfleet.jobs.states import JobState
from fusionfleet.services.batch_summary import STALE_CLAIM_S
from fusionfleet.tenant_layout import admission_prefix
from tests.simulation.farm import MACHINE, RETRIES, TENANT, Farm, Submitted
from tests.simulation.scheduler import Actor
from tests.support.jobs import MEDIA, WORK

PICK = st.integers(min_value=0, max_value=63)  # an index into whatever list the rule picks from
MAX_ACTORS = 6  # live at once: enough for every race here, few enough to keep a schedule short
ADMISSION_PREFIX = admission_prefix(TENANT)
TIMED = frozenset({"slicer", "admitter", "retry", "watchdog"})  # Lambdas: their runtime ends them at their timeout
# A dead reader read nothing (no fault worth a step); Step Functions does not die mid-execution.
UNKILLABLE = frozenset({"reader", "state machine"})


@dataclass
class Stats:
    schedules: int = 0
    steps: int = 0
    invariant_checks: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)  # how the parties ended: kind and state
    fingerprint: str = ""
    first_failure: int = 0  # the schedule (counted from 1) that first broke an invariant; 0: none did

    def reset(self) -> None:
        vars(self).update(vars(Stats()))


def broken(message: str) -> AssertionError:
    """The invariant's failure, remembering how many schedules it took to find the first one."""
    if not STATS.first_failure:
        STATS.first_failure = STATS.schedules + 1
    return AssertionError(message)


STATS = Stats()


@dataclass(frozen=True)
class Profile:
    """What a schedule may do beyond the protocol's happy path (the tests switch parts on)."""

    stall_s: float = 59.0  # the longest a party may be in flight before its runtime kills it
    retries: bool = False  # users retry failed jobs (the run queued, then admitted by the retry's caller)
    batches: bool = False  # tenants submit batches (their items queued in the tenant's line, as its jobs)


PROFILE = Profile()


class FarmMachine(RuleBasedStateMachine):
    """Rules every schedule has: step a party, kill one, move the clock."""

    tenant_limit = 0

    def __init__(self) -> None:
        super().__init__()
        self.profile = PROFILE
        self.kills = self.long_jumps = True
        self.farm = Farm(tenant_limit=self.tenant_limit, faults=STATS.faults)
        self.trace: list[str] = []
        self.submitted: list[Submitted] = []
        self.delivered: list[Submitted] = []
        self.delivered_keys: list[str] = []

    def note(self, line: str) -> None:
        self.trace.append(line)
        STATS.steps += 1

    def pick(self, actors: list[Actor], which: int) -> Actor:
        return actors[which % len(actors)]

    def spawn_slicer(self, submitted: Submitted) -> None:
        self.farm.scheduler.spawn("slicer", submitted.key, self.farm.clock(), lambda: self.farm.slice(submitted.key))

    # ------------------------------------------------------------------ the scheduler's rules
    @initialize(kills=st.booleans(), long_jumps=st.booleans())
    def swarm(self, kills: bool, long_jumps: bool) -> None:
        """Swarm testing: each schedule leaves some faults out, so that quiet schedules, where parties live
        long enough to race, are common rather than rare."""
        self.kills, self.long_jumps = kills, long_jumps
        self.note(f"kills {'on' if kills else 'off'}, long clock jumps {'on' if long_jumps else 'off'}")

    @precondition(lambda self: self.farm.scheduler.live())
    @rule(which=PICK, calls=st.integers(min_value=1, max_value=6))
    def step(self, which: int, calls: int) -> None:
        """One party makes its next calls to AWS (the others wait)."""
        actor = self.pick(self.farm.scheduler.live(), which)
        for _ in range(calls):
            if not actor.live:
                break
            self.note(f"{actor.kind}#{actor.actor_id} {actor.next_call}")
            self.farm.scheduler.step(actor)

    @precondition(lambda self: self.farm.scheduler.live())
    @rule(which=PICK)
    def run(self, which: int) -> None:
        """One party runs to its end while nobody else moves."""
        actor = self.pick(self.farm.scheduler.live(), which)
        self.note(f"{actor.kind}#{actor.actor_id} runs to its end from {actor.next_call}")
        self.farm.scheduler.finish(actor)

    @precondition(lambda self: self.kills and self.farm.scheduler.live())
    @rule(which=PICK, odds=st.integers(min_value=0, max_value=3))
    def kill(self, which: int, odds: int) -> None:
        """A party's process dies before its next call (a Lambda's sandbox gone, the CLI interrupted)."""
        actor = self.pick(self.farm.scheduler.live(), which)
        if odds or actor.kind in UNKILLABLE:
            return  # one draw in four kills: more, and few parties live long enough to race; a dead reader read nothing
        self.note(f"kill {actor.kind}#{actor.actor_id} before {actor.next_call}")
        STATS.faults["party_killed"] += 1
        self.farm.scheduler.kill(actor)

    @rule(seconds=st.sampled_from([1.0, 5.0, 20.0, 61.0, 301.0]))
    def advance(self, seconds: float) -> None:
        """Time passes; a party in flight longer than its runtime allows is killed by it."""
        if seconds > 20 and not self.long_jumps:
            return
        self.farm.clock.advance(seconds)
        self.note(f"clock +{seconds:g}s")
        for actor in self.farm.scheduler.live():
            if actor.kind in TIMED and self.farm.clock() - actor.started_at > self.profile.stall_s:
                STATS.faults["party_timed_out"] += 1
                self.farm.scheduler.kill(actor)
            elif actor.state == "paused":
                STATS.faults["party_stalled"] += 1

    def teardown(self) -> None:
        for actor in self.farm.scheduler.actors:
            STATS.outcomes[f"{actor.kind} {actor.state}"] += 1
        self.farm.scheduler.close()
        STATS.schedules += 1
        digest = hashlib.sha256((STATS.fingerprint + "\n".join(self.trace)).encode())
        STATS.fingerprint = digest.hexdigest()[:16]


class SubmitAndRead(FarmMachine):
    def __init__(self) -> None:
        super().__init__()
        self.keys: list[str] = []  # manifests the CLI is putting or has put
        self.api_jobs: list[str] = []  # ids the tenant API answered with (201)
        self.submitting: list[Actor] = []

    @precondition(lambda self: len(self.keys) < 3 and len(self.farm.scheduler.live()) < MAX_ACTORS)
    @rule(batch=st.booleans(), tenant=st.booleans())
    def submit(self, batch: bool, tenant: bool) -> None:
        """The CLI submits a job or a batch: uploads, the manifest, then the id it prints (accepted from then)."""
        key, work = self.farm.cli_submit(batch, TENANT if tenant else None)
        self.keys.append(key)
        self.note(f"cli submits {key}")
        actor = self.farm.scheduler.spawn("cli", key, self.farm.clock(), work)
        self.submitting.append(actor)
        # Its uploads of media race nothing here: it runs to the put of the manifest (the trigger) at once.
        while actor.live and not actor.next_call.startswith(f"s3.put {MEDIA}/{key}"):
            self.farm.scheduler.step(actor)

    @precondition(lambda self: len(self.api_jobs) < 2 and len(self.farm.scheduler.live()) < MAX_ACTORS)
    @rule(batch=st.booleans())
    def api_submit(self, batch: bool) -> None:
        """A tenant creates a job (or batch) through the HTTP API, uploads its files and starts it."""
        self.note(f"api creates a {'batch' if batch else 'job'}")
        self.farm.scheduler.spawn("api", TENANT, self.farm.clock(), self.farm.api_submit(batch, self.api_jobs))

    @precondition(lambda self: self.api_jobs and len(self.farm.scheduler.live()) < MAX_ACTORS)
    @rule(which=PICK, detail=st.booleans())
    def api_read(self, which: int, detail: bool) -> None:
        """The tenant reads a job the API created (`GET /jobs/{id}`, `GET /jobs/{id}/detail`)."""
        job_id = self.api_jobs[which % len(self.api_jobs)]
        api = self.farm.api
        self.note(f"api reads {'detail of ' if detail else ''}api job {which % len(self.api_jobs)}")
        read = (lambda: api.detail_page(TENANT, job_id)) if detail else (lambda: api.status(TENANT, job_id))
        self.farm.scheduler.spawn("reader", job_id, self.farm.clock(), read)

    def _accepted(self) -> list[Submitted]:
        return [actor.result for actor in self.submitting if actor.state == "done"]

    def _uploaded(self) -> list[str]:
        keys = self.keys + [layout.tenant_manifest_key(TENANT, job_id) for job_id in self.api_jobs]
        return [key for key in keys if self.farm.storage.inner.exists(MEDIA, key)]

    @precondition(
        lambda self: len(self.delivered_keys) < len(self._uploaded()) and len(self.farm.scheduler.live()) < MAX_ACTORS
    )
    @rule()
    def deliver(self) -> None:
        """The next manifest's S3 event reaches a slicer (possibly before the CLI has printed its id)."""
        key = next(key for key in self._uploaded() if key not in self.delivered_keys)
        self.delivered_keys.append(key)
        self.note(f"slicer for {key}")
        self.farm.scheduler.spawn("slicer", key, self.farm.clock(), lambda: self.farm.slice(key))

    @precondition(lambda self: self.delivered_keys and len(self.farm.scheduler.live()) < MAX_ACTORS)
    @rule(which=PICK)
    def redeliver(self, which: int) -> None:
        """The manifest's event again: S3's duplicate, or SQS redelivering after a slicer died (late or not)."""
        key = self.delivered_keys[which % len(self.delivered_keys)]
        self.note(f"slicer again for {key}")
        STATS.faults["slicer_invoked_again"] += 1
        self.farm.scheduler.spawn("slicer", key, self.farm.clock(), lambda: self.farm.slice(key))

    @precondition(lambda self: self._accepted() and len(self.farm.scheduler.live()) < MAX_ACTORS)
    @rule(which=PICK, item=st.integers(min_value=-1, max_value=1))
    def read(self, which: int, item: int) -> None:
        """The user reads an id the CLI printed: a job, a batch or one of its items (`status`, `submit --wait`)."""
        accepted = self._accepted()
        submitted = accepted[which % len(accepted)]
        farm = self.farm
        if submitted.batch and item >= 0:
            subject = item_id(submitted.job_id, item)
            self.note(f"read item {subject}")
            farm.scheduler.spawn("reader", subject, farm.clock(), lambda: farm.job_status(subject))
        elif submitted.batch:
            self.note(f"read batch {submitted.job_id}")
            farm.scheduler.spawn("reader", submitted.job_id, farm.clock(), lambda: farm.batch_detail(submitted.job_id))
        else:
            self.note(f"read job {submitted.job_id}")
            farm.scheduler.spawn("reader", submitted.job_id, farm.clock(), lambda: farm.job_status(submitted.job_id))

    @invariant()
    def accepted_is_never_not_found(self) -> None:
        STATS.invariant_checks += 1
        for actor in self.farm.scheduler.actors:
            if actor.kind == "reader" and actor.error is not None:
                error = actor.error
                what = "read as not found" if isinstance(error, JobNotFound) else f"failed ({type(error).__name__})"
                raise broken(f"reader#{actor.actor_id}: {actor.subject} {what}: {error}")


class Admission(FarmMachine):
    tenant_limit = 1

    @initialize(
        limit=st.integers(min_value=1, max_value=2), lag=st.sampled_from([0.0, 3.0, 30.0]),
        s3_lag=st.sampled_from([0.0, 0.0, 5.0]),
    )  # fmt: skip
    def configure(self, limit: int, lag: float, s3_lag: float) -> None:
        """The tenant's limit, how far behind Step Functions' list of executions runs, and S3's LIST (a fault
        stricter than S3, whose LIST is consistent: the leases and the waiting index are listed)."""
        self.farm = Farm(tenant_limit=limit, faults=STATS.faults)
        self.farm.orchestrator.list_lag_s = lag
        self.farm.storage.listing_lag_s = s3_lag
        self.note(f"limit {limit}, listing lag {lag:g}s, S3 listing lag {s3_lag:g}s")

    @precondition(lambda self: len(self.submitted) < 4 and len(self.farm.scheduler.live()) < MAX_ACTORS)
    @rule()
    def submit(self) -> None:
        """A tenant's manifest is put and a slicer takes it: it prepares and queues the job uninterrupted (that
        path is raced in SubmitAndRead), and stops where it admits the tenant, which is raced here."""
        submitted = self.farm.put_manifest(False, TENANT)
        self.submitted.append(submitted)
        self.delivered.append(submitted)
        self.note(f"put {submitted.key}; slicer for it")
        self.spawn_slicer(submitted)
        self._to_admission(self.farm.scheduler.actors[-1])

    @precondition(
        lambda self: self.profile.batches and len(self.submitted) < 4 and len(self.farm.scheduler.live()) < MAX_ACTORS
    )
    @rule()
    def submit_batch(self) -> None:
        """A tenant's batch of two targets: the slicer opens it and starts what its window has room for."""
        submitted = self.farm.put_manifest(True, TENANT)
        self.submitted.append(submitted)
        self.delivered.append(submitted)
        self.note(f"put batch {submitted.key}; slicer for it")
        self.spawn_slicer(submitted)

    def _to_admission(self, actor: Actor) -> None:
        scheduler = self.farm.scheduler
        while actor.live and not actor.next_call.startswith(f"s3.list {WORK}/{ADMISSION_PREFIX}"):
            scheduler.step(actor)

    @precondition(lambda self: self.delivered)
    @rule(which=PICK)
    def redeliver(self, which: int) -> None:
        """The manifest's event again: S3's duplicate, or SQS redelivering after a slicer died (late or not)."""
        submitted = self.delivered[which % len(self.delivered)]
        self.note(f"slicer again for {submitted.key}")
        STATS.faults["slicer_invoked_again"] += 1
        self.spawn_slicer(submitted)

    @precondition(lambda self: len(self.farm.scheduler.live()) < MAX_ACTORS)
    @rule()
    def sweep(self) -> None:
        """The watchdog's sweep admits the tenant (possibly while another party admits it)."""
        self.note("watchdog admits")
        if self.farm.scheduler.live("admitter") or self.farm.scheduler.live("slicer"):
            STATS.faults["admissions_at_once"] += 1
        self.farm.scheduler.spawn("admitter", TENANT, self.farm.clock(), lambda: self.farm.admitter().admit(TENANT))

    @precondition(lambda self: self.farm.orchestrator.running())
    @rule(which=PICK, failed=st.booleans(), follow=st.booleans())
    def end(self, which: int, failed: bool, follow: bool) -> None:
        """A running job ends; the notice follower admits the tenant's next job (or its message is lost). A
        batch's item tells its batch instead (its notice is quiet): the slicer advances the batch and admits."""
        names = self.farm.orchestrator.running()
        name = names[which % len(names)]
        self.farm.orchestrator.end(execution_arn(MACHINE, name), "FAILED" if failed else "SUCCEEDED")
        self.note(f"{name} ends {'FAILED' if failed else 'SUCCEEDED'}")
        item = batch_of_item(parse_execution_name(name)[0])
        if item is not None:
            if follow and len(self.farm.scheduler.live()) < MAX_ACTORS:
                job_id, farm = parse_execution_name(name)[0], self.farm
                farm.scheduler.spawn("slicer", job_id, farm.clock(), lambda: farm.tell_batch(item[0], job_id))
            elif not follow:
                STATS.faults["batch_tell_lost"] += 1
            return
        if follow and len(self.farm.scheduler.live()) < MAX_ACTORS:
            self.farm.scheduler.spawn("admitter", TENANT, self.farm.clock(), lambda: self.farm.admitter().admit(TENANT))
        elif not follow:
            STATS.faults["notice_follow_lost"] += 1

    @precondition(lambda self: self.profile.retries and self._failed() and len(self.farm.scheduler.live()) < MAX_ACTORS)
    @rule(which=PICK, via=st.sampled_from(RETRIES))
    def retry(self, which: int, via: str) -> None:
        """The tenant retries a failed job: its run is queued in the tenant's line and the caller admits the
        tenant at once, racing the other admitters, the jobs ending and the sweep (`fusionfleet retry` and the
        dashboards with the local stack's limits, `POST /jobs/{id}/retry` with the API's, a batch's retry with
        the slicer's admitter), or the CLI on a stack whose limits it cannot read queues it for the next
        admission (`Farm.retry`)."""
        failed = self._failed()
        job_id = failed[which % len(failed)]
        self.note(f"retry {job_id} via {via}")
        farm = self.farm
        farm.scheduler.spawn("retry", job_id, farm.clock(), lambda: farm.retry(job_id, via))

    def _failed(self) -> list[str]:
        ended = [e for e in self.farm.orchestrator.executions.values() if e.status == "FAILED"]
        running = {parse_execution_name(name)[0] for name in self.farm.orchestrator.running()}
        return sorted({parse_execution_name(e.name)[0] for e in ended} - running)

    @invariant()
    def tenant_within_its_limit(self) -> None:
        STATS.invariant_checks += 1
        running = self.farm.orchestrator.running(f"{TENANT}{TENANT_SEPARATOR}")
        if len(running) > self.farm.config.tenants.max_running_jobs:
            self.failed = True
            raise broken(
                f"tenant {TENANT} runs {len(running)} jobs, over its limit of "
                f"{self.farm.config.tenants.max_running_jobs}: {sorted(running)}"
            )

    # ------------------------------------------------------------------ the end of a schedule
    failed = False

    def teardown(self) -> None:
        try:
            if not self.failed:  # a broken invariant is the schedule's failure: the drain must not hide it
                self.everything_ends()
        finally:
            super().teardown()

    def everything_ends(self) -> None:
        """Liveness (item 3: every accepted job ends): after the schedule, with no more faults, the parties
        the stack would run anyway (SQS redelivering a dead slicer's event, the watchdog's sweeps with their
        batch ticks and admissions, executions ending and telling their batches) run until nothing moves; then
        every accepted job and batch item must have ended. A job that reads PENDING or WAITING for ever is
        lost as surely as one with no notice."""
        farm = self.farm
        for actor in farm.scheduler.live():
            farm.scheduler.finish(actor)  # nobody dies now: what was in flight completes
        for submitted in self.delivered:
            farm.slice(submitted.key)  # SQS redelivers what a dead slicer had taken (a duplicate is harmless)
        for _sweep in range(12):
            farm.clock.advance(STALE_CLAIM_S + 61.0)
            for batch_id in open_batches(farm.storage, WORK):
                farm.slicer.advance(batch_id)
            farm.admitter().admit(TENANT)
            self.tenant_within_its_limit()
            for name in farm.orchestrator.running():
                farm.orchestrator.end(execution_arn(MACHINE, name), "SUCCEEDED")
                job_id = parse_execution_name(name)[0]
                item = batch_of_item(job_id)
                if item is not None:
                    farm.tell_batch(item[0], job_id)
                else:
                    farm.admitter().admit(TENANT)
        STATS.invariant_checks += 1
        stuck = {job_id: state for job_id, state in self._job_states().items() if not state.ended}
        if stuck:
            raise broken(f"accepted jobs never end after every party ran and the watchdog swept 12 times: {stuck}")

    def _job_states(self) -> dict[str, JobState]:
        jobs = []
        for submitted in self.submitted:
            if submitted.batch:
                jobs += [item_id(submitted.job_id, index) for index in range(submitted.items)]
            else:
                jobs.append(submitted.job_id)
        return {job_id: self.farm.job_status(job_id).state for job_id in jobs}
