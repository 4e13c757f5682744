"""What follows a job's one final notice: its final webhook event, the cost of a run that did not merge
recorded in its summary, its tenant's bill settled, and the tenant's next waiting job started.

The notification topic has a queue subscribed to it (raw delivery, no filter); this follower reads
it. Every party that ends a job (the state machine, the watchdog, a cancel, the slicer's rejections)
publishes the job's final notice there once, after claiming it (`work/<job>/notice.json`), so the
final event is built from that one notice on every path, and a duplicate of the notice (SNS delivers
at least once) makes the same event id, which the deliverer sends once. Budget notices are the
tenant's, not a job's: they are passed over.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fusionfleet.adapters.storage import Storage
from fusionfleet.fleet import budget
from fusionfleet.fleet.tenant_settings import read_settings
from fusionfleet.jobs import summary
from fusionfleet.jobs.attempts import read_attempts
from fusionfleet.jobs.cost import GpuPrices, attempts_cost
from fusionfleet.jobs.ids import tenant_of_job
from fusionfleet.jobs.ledger import month_of, settle_job
from fusionfleet.jobs.runs import current_run
from fusionfleet.jobs.states import NoticeStatus
from fusionfleet.services.admission import Admitter
from fusionfleet.webhooks.events import WebhookEvent, event_id, final_kind
from fusionfleet.webhooks.outbox import WebhookOutbox

logger = logging.getLogger(__name__)

REJECTED_STAGE = "validation"  # the slicer's rejection notices (fusionfleet.messages.rejection_notice)


@dataclass(frozen=True)
class Followed:
    job_id: str
    event_queued: bool = False
    settled: int = 0  # ledger entries written for attempts whose worker died
    started: tuple[str, ...] = ()  # the tenant's jobs started after it
    # Attempts still working (a losing copy stopping): the notice is followed again shortly, to bill
    # them if their worker dies before it writes its own entry.
    unsettled: int = 0


class JobEnded:
    def __init__(
        self,
        storage: Storage,
        work_bucket: str,
        outbox: WebhookOutbox,
        admitter: Admitter,
        prices: GpuPrices,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._storage = storage
        self._bucket = work_bucket
        self._outbox = outbox
        self._admitter = admitter
        self._prices = prices
        self._clock = clock

    def handle(self, notice: dict[str, Any]) -> Followed | None:
        job_id = str(notice.get("job_id") or "")
        kind = final_kind(str(notice.get("status") or ""))
        if not job_id or kind is None:
            return None  # not a job's final notice (a tenant's budget notice)
        now = self._clock()
        rejected = notice.get("stage") == REJECTED_STAGE
        run = 0 if rejected else current_run(self._storage, self._bucket, job_id).run
        event = WebhookEvent(
            event_id=event_id(job_id, run, kind, "rejected" if rejected else ""),
            job_id=job_id, run=run, kind=kind, occurred_at=now, data=notice,
        )  # fmt: skip
        queued = self._outbox.emit(event)
        merged = kind == NoticeStatus.SUCCEEDED  # its cost is the merge's
        settled, unsettled = (0, 0) if rejected else self._settle(job_id, run, now, priced=not merged)
        tenant = tenant_of_job(job_id)
        started = tuple(item.job_id for item in self._admitter.admit(tenant)) if tenant else ()
        logger.info("job %s ended %s: event queued %s, %s spend entries settled, started after it: %s",
                    job_id, kind, queued, settled, ", ".join(started) or "none")  # fmt: skip
        return Followed(job_id, queued, settled, started, unsettled)

    def _settle(self, job_id: str, run: int, now: float, priced: bool) -> tuple[int, int]:
        """Record what the run cost (`priced`: it did not merge, whose result has the figure), and bill
        the attempts whose workers died; the tenant's budget is checked with them."""
        tenant = tenant_of_job(job_id)
        if tenant is None and not priced:
            return 0, 0
        attempts = read_attempts(self._storage, self._bucket, job_id)
        # Priced here, once per round, so no read of the job has to read every attempt record to show it
        # (the API function's 29 s are too few for a failed job of thousands: fusionfleet.jobs.reader).
        cost = attempts_cost(attempts, now, ended=True, prices=self._prices) if priced else None
        if cost is not None:
            summary.try_update(self._storage, self._bucket, job_id, summary.costed(run, cost))
        if tenant is None:
            return 0, 0
        settled = settle_job(self._storage, self._bucket, attempts, self._prices, now)
        settings = read_settings(self._storage, self._bucket, tenant)
        if settled.written and settings.monthly_budget_usd is not None:
            budget.check(self._storage, self._bucket, settings, month_of(now), now)
        return settled.written, settled.alive
