from __future__ import annotations

import re

from fusionfleet import layout
from fusionfleet.jobs.ids import job_id, tenant_of_job


def test_job_id_is_a_valid_execution_name_and_stable() -> None:
    first = job_id("media", "jobs/Zoë + friends 100%.json", '"abc"')
    assert first == job_id("media", "jobs/Zoë + friends 100%.json", "abc")  # quotes do not matter
    assert re.fullmatch(r"[a-z0-9-]{1,80}", first)
    assert first.startswith("zoe-friends-100-")


def test_a_changed_manifest_is_a_new_job_the_same_one_is_not() -> None:
    assert job_id("m", "jobs/a.json", "etag1") != job_id("m", "jobs/a.json", "etag2")
    assert job_id("m", "jobs/a.json", "etag1") != job_id("m", "jobs/b.json", "etag1")


def test_long_names_are_cut_to_fit() -> None:
    assert len(job_id("m", "jobs/" + "x" * 500 + ".json", "e")) <= 80


def test_keys() -> None:
    assert layout.segment_key("j", 7) == "work/j/segments/00007.mp4"
    assert layout.segment_record_key("j", 7) == "work/j/segments/00007.json"
    assert layout.default_output_key("jobs/team/a b.json") == "outputs/team/a b.mp4"
    assert layout.is_manifest_key("jobs/a.json") and not layout.is_manifest_key("jobs/.json")
    assert not layout.is_manifest_key("inputs/a.json")


def test_tenant_keys_have_their_own_drop_and_outputs() -> None:
    assert layout.is_manifest_key("tenants/acme/jobs/a.json")
    assert not layout.is_manifest_key("tenants/acme/jobs/.json")
    assert not layout.is_manifest_key("tenants/Not_A_Tenant/jobs/a.json")
    assert not layout.is_manifest_key("tenants/acme/inputs/a.json")
    assert layout.tenant_of("tenants/acme/jobs/a.json") == "acme"
    assert layout.tenant_of("jobs/a.json") is None
    assert layout.manifest_name("tenants/acme/jobs/team/a.json") == "team/a"
    assert layout.default_output_key("tenants/acme/jobs/team/a.json") == "tenants/acme/outputs/team/a.mp4"
    assert layout.default_output_key("jobs/a.json") == "outputs/a.mp4"


def test_a_tenants_job_ids_carry_the_tenant_and_fit_an_execution_name() -> None:
    tenant = "a" * 32
    job = job_id("bucket", f"tenants/{tenant}/jobs/{'x' * 300}.json", '"etag"')
    assert len(job) <= 80 and job.startswith(f"{tenant}_x")
    assert tenant_of_job(job) == tenant
    assert tenant_of_job(job_id("bucket", "jobs/a_b.json", '"etag"')) is None
