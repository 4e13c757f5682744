"""The work bucket's tenant records, every key format both ways (as fusionfleet/layout.py for jobs):
a tenant's settings and admission leases, its waiting jobs in order, its spend ledger and budget markers.
They live under names a job id never has (`work/_…/`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from fusionfleet.layout import _INDEX, _JOB, WORK_PREFIX, _name_under, is_tenant_name

TENANT_RECORDS_PREFIX = f"{WORK_PREFIX}_tenants/"
WAITING_PREFIX = f"{WORK_PREFIX}_waiting/"
SPEND_PREFIX = f"{WORK_PREFIX}_spend/"
BUDGET_PREFIX = f"{WORK_PREFIX}_budget/"


def tenant_records_prefix(tenant: str) -> str:
    """The tenant's settings and admission leases."""
    return f"{TENANT_RECORDS_PREFIX}{tenant}/"


def tenant_settings_key(tenant: str) -> str:
    """The tenant's own limits and budget (fusionfleet.fleet.tenant_settings)."""
    return f"{tenant_records_prefix(tenant)}settings.json"


def waiting_prefix(tenant: str) -> str:
    """The tenant's waiting jobs in submission order: one index entry each (fusionfleet.jobs.waiting)."""
    return f"{WAITING_PREFIX}{tenant}/"


def waiting_index_key(tenant: str, order: int, job_id: str) -> str:
    return f"{waiting_prefix(tenant)}{order:023d}-{job_id}.json"


def admission_prefix(tenant: str) -> str:
    """The tenant's admission leases, one per generation (fusionfleet.services.admission)."""
    return f"{tenant_records_prefix(tenant)}admit/"


def admission_lease_key(tenant: str, generation: int) -> str:
    return f"{admission_prefix(tenant)}{generation:012d}.json"


def admission_slot_key(tenant: str, slot: int) -> str:
    """One of the tenant's running-job slots, claimed by a conditional write for the job it runs."""
    return f"{tenant_records_prefix(tenant)}slots/{slot:04d}.json"


def spend_prefix(tenant: str, month: str) -> str:
    """The tenant's spend ledger for one month (`YYYY-MM`): one entry per attempt (fusionfleet.jobs.ledger)."""
    return f"{SPEND_PREFIX}{tenant}/{month}/"


def spend_entry_prefix(tenant: str, month: str, job_id: str, index: int, run: int, attempt: int, copy: int) -> str:
    """Where one attempt's ledger entry is, whatever its amount."""
    return f"{spend_prefix(tenant, month)}{job_id}/{index:05d}-r{run:03d}-a{attempt:03d}-c{copy}-"


def spend_entry_key(
    tenant: str, month: str, job_id: str, index: int, run: int, attempt: int, copy: int, micro_usd: int
) -> str:
    """One attempt's cost, its amount in the key: a month's spend is one LIST, no reads."""
    return f"{spend_entry_prefix(tenant, month, job_id, index, run, attempt, copy)}{micro_usd}u.json"


def budget_prefix(tenant: str) -> str:
    return f"{BUDGET_PREFIX}{tenant}/"


def budget_marker_key(tenant: str, month: str, cap_micro_usd: int) -> str:
    """Written once when the tenant's spend in `month` reaches this cap (fusionfleet.fleet.budget)."""
    return f"{budget_prefix(tenant)}{month}-{cap_micro_usd}.json"


def parse_tenant_settings_key(key: str) -> str | None:
    """The tenant of `tenant_settings_key`."""
    tenant, slash, rest = key.removeprefix(TENANT_RECORDS_PREFIX).partition("/")
    ok = key.startswith(TENANT_RECORDS_PREFIX) and slash and rest == "settings.json" and is_tenant_name(tenant)
    return tenant if ok else None


def parse_waiting_index_key(key: str) -> tuple[str, int, str] | None:
    """(tenant, order, job id) of `waiting_index_key`."""
    tenant, slash, rest = key.removeprefix(WAITING_PREFIX).partition("/")
    if not key.startswith(WAITING_PREFIX) or not slash or not is_tenant_name(tenant):
        return None
    name = _name_under(rest, "", ".json")
    order, dash, job_id = (name or "").partition("-")
    return (tenant, int(order), job_id) if dash and order.isdigit() and job_id else None


def parse_admission_lease_key(key: str) -> int | None:
    """The generation of an `admission_lease_key`."""
    name = key.rsplit("/", 1)[-1].removesuffix(".json")
    return int(name) if "/admit/" in key and name.isdigit() else None


_SPEND_ENTRY = re.compile(
    rf"^{SPEND_PREFIX}(?P<tenant>[a-z0-9][a-z0-9-]*)/(?P<month>\d{{4}}-\d{{2}})/{_JOB}/{_INDEX}-r(?P<run>\d{{3,}})"
    r"-a(?P<attempt>\d{3,})-c(?P<copy>\d+)-(?P<micro>\d+)u\.json$"
)


@dataclass(frozen=True)
class SpendEntry:
    """`spend_entry_key`."""

    tenant: str
    month: str
    job_id: str
    index: int
    run: int
    attempt: int
    copy: int
    micro_usd: int


def parse_spend_entry_key(key: str) -> SpendEntry | None:
    match = _SPEND_ENTRY.match(key)
    if not match:
        return None
    number = {name: int(match[name]) for name in ("index", "run", "attempt", "copy", "micro")}
    return SpendEntry(
        match["tenant"], match["month"], match["job"], number["index"], number["run"], number["attempt"],
        number["copy"], number["micro"],
    )  # fmt: skip
