"""Tenants' jobs over a limit wait and start by themselves in submission order; a priority cap refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fusionfleet import layout
from fusionfleet.adapters.orchestrator import Execution, execution_arn
from fusionfleet.fleet.tenant_settings import TenantSettings, read_settings, write_settings
from fusionfleet.fleet.tenants import TenantLimits
from fusionfleet.jobs.waiting import read_waiting, waiting_in_order
from fusionfleet.services.admission import AdmissionConfig, Admitter
from tests.support.fakes import FakeOrchestrator, FakeStorage
from tests.support.tenants import MACHINE, MEDIA, WORK, face_bytes, make_slicer, notices


def drop_named(storage: FakeStorage, clip: Path, tenant: str, name: str, **fields: object) -> str:
    home = layout.tenant_prefix(tenant)
    storage.put_bytes(MEDIA, f"{home}inputs/face.jpg", face_bytes())
    storage.put_bytes(MEDIA, f"{home}inputs/clip.mp4", clip.read_bytes())
    body = {"source": [f"{home}inputs/face.jpg"], "target": f"{home}inputs/clip.mp4", **fields}
    key = layout.tenant_manifest_key(tenant, name)
    storage.put_bytes(MEDIA, key, json.dumps(body).encode())
    return key


def end(orchestrator: FakeOrchestrator, job_id: str, status: str = "SUCCEEDED") -> None:
    arn = execution_arn(MACHINE, job_id)
    orchestrator.states[arn] = Execution(arn, status, input=orchestrator.executions[arn])


def admitter(storage: FakeStorage, orchestrator: FakeOrchestrator, limits: TenantLimits) -> Admitter:
    return Admitter(storage, orchestrator, AdmissionConfig(WORK, MACHINE, stack_limits=limits))


def test_three_jobs_of_a_one_at_a_time_tenant_start_one_by_one_in_submission_order(clip: Path) -> None:
    # GIVEN a tenant that may run one job at a time, submitting three
    limits = TenantLimits(max_running_jobs=1)
    slicer, storage, orchestrator = make_slicer(limits)
    write_settings(storage, WORK, TenantSettings(tenant="acme", max_running_jobs=1), limits)
    outcomes = [slicer.handle(MEDIA, drop_named(storage, clip, "acme", name)) for name in ("c", "a", "b")]
    # THEN the first starts and the other two wait, in the order they came, nobody told of a failure
    assert [outcome.status for outcome in outcomes] == ["started", "waiting", "waiting"]
    jobs = [outcome.job_id for outcome in outcomes]
    assert [job for _order, job, _key in waiting_in_order(storage, WORK, "acme")] == jobs[1:]
    assert notices(slicer) == []
    second = read_waiting(storage, WORK, jobs[1])
    assert second is not None and "running 1 of the 1 jobs" in second.reason
    # WHEN nothing has ended, admission starts nothing more
    keeper = admitter(storage, orchestrator, limits)
    assert keeper.admit("acme") == []
    # WHEN the first ends, the second starts (and only it); then the third
    end(orchestrator, jobs[0])
    assert [item.job_id for item in keeper.admit("acme")] == [jobs[1]]
    assert keeper.admit("acme") == []
    end(orchestrator, jobs[1], "FAILED")
    assert [item.job_id for item in keeper.admit("acme")] == [jobs[2]]
    assert orchestrator.starts == [execution_arn(MACHINE, job) for job in jobs]
    assert waiting_in_order(storage, WORK, "acme") == []


def test_a_duplicate_event_of_a_waiting_job_does_not_start_it_out_of_turn(clip: Path) -> None:
    limits = TenantLimits(max_running_jobs=1)
    slicer, storage, orchestrator = make_slicer(limits)
    slicer.handle(MEDIA, drop_named(storage, clip, "acme", "first"))
    key = drop_named(storage, clip, "acme", "second")
    waiting = slicer.handle(MEDIA, key)
    again = slicer.handle(MEDIA, key)
    assert (waiting.status, again.status) == ("waiting", "duplicate")
    assert len(orchestrator.starts) == 1


def test_a_job_above_the_tenants_priority_cap_is_refused_before_its_media_is_read(clip: Path) -> None:
    limits = TenantLimits()
    slicer, storage, _orchestrator = make_slicer(limits)
    write_settings(storage, WORK, TenantSettings(tenant="acme", max_priority="normal"), limits)
    key = drop_named(storage, clip, "acme", "vip", priority="high")
    storage.reads.clear()
    refused = slicer.handle(MEDIA, key)
    assert refused.status == "rejected"
    assert "may submit at most normal priority" in refused.reason and "asks for high" in refused.reason
    assert "tenants/acme/inputs/clip.mp4" not in storage.reads
    (notice,) = notices(slicer)
    assert notice["tenant"] == "acme"
    # normal and low are fine
    assert slicer.handle(MEDIA, drop_named(storage, clip, "acme", "plain", priority="low")).status == "started"


def test_only_one_party_admits_a_tenant_at_a_time_and_a_dead_holders_lease_is_taken_over() -> None:
    storage, orchestrator = FakeStorage(), FakeOrchestrator()
    now = [1000.0]
    config = AdmissionConfig(WORK, MACHINE, lease_s=60)
    first = Admitter(storage, orchestrator, config, clock=lambda: now[0])
    # a holder that took the lease and died before releasing it
    assert first._acquire("acme") == 1
    second = Admitter(storage, orchestrator, config, clock=lambda: now[0])
    assert second._acquire("acme") is None
    now[0] += 61
    assert second._acquire("acme") == 2
    second._release("acme", 2)
    assert first._acquire("acme") == 3


def test_tenant_settings_fall_back_to_the_stacks_and_refuse_limits_that_do_not_fit() -> None:
    storage = FakeStorage()
    stack = TenantLimits(max_running_jobs=8, max_segments=64)
    assert read_settings(storage, WORK, "acme").limits(stack) == stack
    stored = write_settings(storage, WORK, TenantSettings(tenant="acme", max_running_jobs=2), stack)
    assert read_settings(storage, WORK, "acme") == stored
    assert stored.limits(stack) == TenantLimits(2, 64)
    with pytest.raises(Exception, match="do not fit"):
        write_settings(storage, WORK, TenantSettings(tenant="acme", max_running_jobs=9, max_segments=4), stack)


def test_a_slot_is_claimed_by_a_conditional_write_and_taken_over_once_its_job_no_longer_runs() -> None:
    # GIVEN a tenant that may run one job, and an admitter
    storage, orchestrator = FakeStorage(), FakeOrchestrator()
    keeper = Admitter(storage, orchestrator, AdmissionConfig(WORK, MACHINE, claim_s=900.0))
    # WHEN job a claims the slot and starts
    assert keeper._claim_slot("acme", 1, "acme_a", now=0.0)
    orchestrator.start(MACHINE, "acme_a", {})
    # THEN job b finds it taken while a runs, and a's own claim is still a's
    assert not keeper._claim_slot("acme", 1, "acme_b", now=10.0)
    assert keeper._claim_slot("acme", 1, "acme_a", now=10.0)
    # WHEN a ends, b takes the slot over (an If-Match replace), and job c finds it b's
    end(orchestrator, "acme_a")
    assert keeper._claim_slot("acme", 1, "acme_b", now=20.0)
    assert not keeper._claim_slot("acme", 1, "acme_c", now=20.0)  # b's claim holds while b's start is under way
    assert storage.conflicts == 0


def test_a_slot_claimed_for_a_job_that_never_started_lapses_after_claim_s() -> None:
    # GIVEN a slot claimed for job a by a party that died before starting it
    storage, orchestrator = FakeStorage(), FakeOrchestrator()
    keeper = Admitter(storage, orchestrator, AdmissionConfig(WORK, MACHINE, claim_s=900.0))
    assert keeper._claim_slot("acme", 1, "acme_a", now=0.0)
    # THEN it holds for claim_s (a start may still be under way), then another job may take it
    assert not keeper._claim_slot("acme", 1, "acme_b", now=899.0)
    assert keeper._claim_slot("acme", 1, "acme_b", now=901.0)
