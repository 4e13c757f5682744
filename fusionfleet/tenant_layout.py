"""The work bucket's tenant records, every key format both ways (as fusionfleet/layout.py for jobs):
a tenant's settings and admission leases, its waiting jobs in order, its spend ledger and budget markers.
They live under names a job id never has (`work/_…/`)."""

from __future__ import annotations

from dataclasses import dataclass

from fusionfleet.key_format import KeyFormat
from fusionfleet.layout import WORK_PREFIX

TENANT_RECORDS_PREFIX = f"{WORK_PREFIX}_tenants/"
WAITING_PREFIX = f"{WORK_PREFIX}_waiting/"
SPEND_PREFIX = f"{WORK_PREFIX}_spend/"
BUDGET_PREFIX = f"{WORK_PREFIX}_budget/"
SETTINGS_FILE = KeyFormat(TENANT_RECORDS_PREFIX + "{tenant}/settings.json")
WAITING_FILE = KeyFormat(WAITING_PREFIX + "{tenant}/{order:023d}-{job}.json")
ADMISSION_LEASE_FILE = KeyFormat(TENANT_RECORDS_PREFIX + "{tenant}/admit/{generation:012d}.json")
ADMISSION_SLOT_FILE = KeyFormat(TENANT_RECORDS_PREFIX + "{tenant}/slots/{slot:04d}.json")
SPEND_ENTRY_FILE = KeyFormat(
    SPEND_PREFIX + "{tenant}/{month}/{job}/{index:05d}-r{run:03d}-a{attempt:03d}-c{copy:01d}-{micro:01d}u.json"
)
BUDGET_MARKER_FILE = KeyFormat(BUDGET_PREFIX + "{tenant}/{month}-{cap:01d}.json")


def tenant_records_prefix(tenant: str) -> str:
    """The tenant's settings and admission leases."""
    return f"{TENANT_RECORDS_PREFIX}{tenant}/"


def tenant_settings_key(tenant: str) -> str:
    """The tenant's own limits and budget (fusionfleet.fleet.tenant_settings)."""
    return SETTINGS_FILE.key(tenant=tenant)


def waiting_prefix(tenant: str) -> str:
    """The tenant's waiting jobs in submission order: one index entry each (fusionfleet.jobs.waiting)."""
    return f"{WAITING_PREFIX}{tenant}/"


def waiting_index_key(tenant: str, order: int, job_id: str) -> str:
    return WAITING_FILE.key(tenant=tenant, order=order, job=job_id)


def admission_prefix(tenant: str) -> str:
    """The tenant's admission leases, one per generation (fusionfleet.services.admission)."""
    return f"{tenant_records_prefix(tenant)}admit/"


def admission_lease_key(tenant: str, generation: int) -> str:
    return ADMISSION_LEASE_FILE.key(tenant=tenant, generation=generation)


def admission_slot_key(tenant: str, slot: int) -> str:
    """One of the tenant's running-job slots, claimed by a conditional write for the job it runs."""
    return ADMISSION_SLOT_FILE.key(tenant=tenant, slot=slot)


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
    return SPEND_ENTRY_FILE.key(
        tenant=tenant, month=month, job=job_id, index=index, run=run, attempt=attempt, copy=copy, micro=micro_usd
    )


def budget_prefix(tenant: str) -> str:
    return f"{BUDGET_PREFIX}{tenant}/"


def budget_marker_key(tenant: str, month: str, cap_micro_usd: int) -> str:
    """Written once when the tenant's spend in `month` reaches this cap (fusionfleet.fleet.budget)."""
    return BUDGET_MARKER_FILE.key(tenant=tenant, month=month, cap=cap_micro_usd)


def parse_tenant_settings_key(key: str) -> str | None:
    """The tenant of `tenant_settings_key`."""
    found = SETTINGS_FILE.parse(key)
    return str(found["tenant"]) if found else None


def parse_waiting_index_key(key: str) -> tuple[str, int, str] | None:
    """(tenant, order, job id) of `waiting_index_key`."""
    found = WAITING_FILE.parse(key)
    return (str(found["tenant"]), int(found["order"]), str(found["job"])) if found else None


def parse_admission_lease_key(key: str) -> int | None:
    """The generation of an `admission_lease_key`."""
    found = ADMISSION_LEASE_FILE.parse(key)
    return int(found["generation"]) if found else None


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
    found = SPEND_ENTRY_FILE.parse(key)
    if not found:
        return None
    number = [int(found[name]) for name in ("index", "run", "attempt", "copy", "micro")]
    return SpendEntry(str(found["tenant"]), str(found["month"]), str(found["job"]), *number)
