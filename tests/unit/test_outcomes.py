"""How a message ends (gpu_worker.delivery.outcomes.decide): every outcome and every why, from what happened, as a
table; a few properties over many cases; and docs/layout.md's list of endings held equal to the code's."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from fusionfleet.errors import InputRejected, SegmentFailed, TokenGone
from fusionfleet.messages import SegmentResult
from gpu_worker.delivery.facts import Failure, Progress, Standing
from gpu_worker.delivery.keeper import Loss, LossKind
from gpu_worker.delivery.outcomes import (
    OUTCOMES,
    Abandon,
    DeadLetter,
    Delivery,
    Drop,
    DropWhy,
    Ending,
    Fail,
    Finished,
    GiveBack,
    Happened,
    Lost,
    Malformed,
    Outcome,
    Raised,
    Resend,
    ResendWhy,
    RetryLater,
    Rules,
    Succeeded,
    Taken,
    Unstarted,
    decide,
    ended_well,
)
from gpu_worker.delivery.retry import ProgressPolicy, RetryPolicy
from gpu_worker.errors import Blocked, Cancelled, GivenBack, WorkersBlocklisted
from gpu_worker.lifecycle.stopping import ColdStop
from tests.support.tasks import StubTask
from tests.support.template import ROOT

RULES = Rules(RetryPolicy(max_attempts=3, backoff_s=(2, 10, 60)), ProgressPolicy(max_deliveries=6))
RESULT = SegmentResult(index=0, key="work/s/00000.mp4", frames=50, engine_s=1.5)


class Segment(StubTask):
    """A task that checkpoints, as a render task does."""

    @property
    def saves_progress(self) -> bool:
        return True


class Strict(BaseModel):
    task_token: str


def malformed() -> ValidationError:
    try:
        Strict.model_validate({})
    except ValidationError as error:
        return error
    raise AssertionError("a task without a token was accepted")


SEGMENT, MERGE, BACKUP = Segment(task_token="t"), StubTask(task_token="m"), Segment(task_token="t", copy_number=1)
FIRST = Delivery(attempt=1, receive_count=1, receive_limit=3)
SECOND = Delivery(attempt=2, receive_count=2, receive_limit=3)
LAST = Delivery(attempt=3, receive_count=3, receive_limit=3)
FAILED = Failure("SegmentFailed", "the encoder fell over", 1)


@dataclass(frozen=True)
class Case:
    name: str
    task: StubTask
    delivery: Delivery
    happened: Happened
    outcome: Outcome | None


CASES = [
    # At take: the checks of a task just taken.
    Case("renders", SEGMENT, FIRST, Taken(), None),
    Case("token gone at take", SEGMENT, FIRST, Taken(token_gone="TaskTimedOut"), Drop(
        DropWhy.TOKEN_GONE, "its token is gone (TaskTimedOut); dropping the message unrendered")),
    Case("job stopped at take", SEGMENT, FIRST, Taken(standing=Standing(stopped=True)), Drop(
        DropWhy.JOB_STOPPED, "its job was cancelled or has failed; dropping the message unrendered")),
    Case("job lost at take", SEGMENT, FIRST, Taken(standing=Standing(stopped=True, token_cause="lost")), Drop(
        DropWhy.JOB_STOPPED, "its job was cancelled or has failed; dropping the message unrendered", cause="lost")),
    Case("held at take", SEGMENT, SECOND, Taken(standing=Standing(held="budget spent")), Resend(
        ResendWhy.HELD, "budget spent", 1, 0, 0)),
    # A copy that lost starts all the same: its start answers with the winner's result.
    Case("superseded at take", SEGMENT, FIRST, Taken(standing=Standing(superseded="copy 1 won")), None),
    Case("last delivery with new chunks", SEGMENT, LAST, Taken(standing=Standing(progress=Progress(40, 2))),
         Resend(
        ResendWhy.PROGRESS, "delivery 3 of 3, 40 frames saved (0 when sent), 0 of its deliveries killed or stopped: "
        "sent again with a fresh receive count", 2, 2, 40, or_give_back=False)),
    Case("last delivery after kills", SEGMENT, LAST, Taken(standing=Standing(progress=Progress(0, 1))),
         Resend(
        ResendWhy.PROGRESS, "delivery 3 of 3, 0 frames saved (0 when sent), 1 of its deliveries killed or stopped: "
        "sent again with a fresh receive count", 2, 1, 0, or_give_back=False)),
    Case("last delivery after failures", SEGMENT, LAST, Taken(standing=Standing(progress=Progress(0, 2))), None),
    Case("a merge's last delivery", MERGE, LAST, Taken(standing=Standing(progress=Progress(40, 0))), None),
    # The task's own end.
    Case("finished", SEGMENT, FIRST, Finished(RESULT), Succeeded(RESULT)),
    Case("failed, retries left", SEGMENT, FIRST, Raised(SegmentFailed("the encoder fell over")), RetryLater(FAILED, 2)),
    Case("failed on the last attempt", SEGMENT, LAST, Raised(SegmentFailed("the encoder fell over")), DeadLetter(
        Failure("SegmentFailed", "the encoder fell over", 3))),
    Case("bad input", SEGMENT, FIRST, Raised(InputRejected("no face")), Fail(Failure("InputRejected", "no face", 1))),
    Case("everyone blocklisted", SEGMENT, FIRST, Raised(WorkersBlocklisted("all")), Fail(
        Failure("WorkersBlocklisted", "all", 1))),
    Case("token gone on a retried failure", SEGMENT, LAST, Raised(TokenGone("Gone")), DeadLetter(
        Failure("TokenGone", "Gone", 3, recorded=False))),
    Case("a backup copy gives up", BACKUP, LAST, Raised(SegmentFailed("x")), Drop(
        DropWhy.BACKUP_GAVE_UP, "backup copy 1 gave up; the original carries on", Failure("SegmentFailed", "x", 3))),
    Case("blocked", SEGMENT, SECOND, Raised(Blocked("w is blocklisted")), Resend(
        ResendWhy.BLOCKED, "w is blocklisted", 1, 0, 0, to_top=True)),
    Case("blocked, fresh", SEGMENT, FIRST, Raised(Blocked("w is blocklisted")), Resend(
        ResendWhy.BLOCKED, "w is blocklisted", 0, 0, 0)),
    Case("warm stop", SEGMENT, FIRST, Raised(GivenBack("checkpointed")), GiveBack("checkpointed")),
    Case("cold stop", SEGMENT, FIRST, Raised(ColdStop()), GiveBack()),
    Case("warm stop on the last delivery", SEGMENT, LAST, Raised(GivenBack("c"), progress=Progress(0, 2)), Resend(
        ResendWhy.PROGRESS, "delivery 3 of 3, 0 frames saved (0 when sent), 1 of its deliveries killed or stopped: "
        "sent again with a fresh receive count", 2, 0, 0)),
    # A lost hold, while it ran or waited its turn.
    Case("cancelled", SEGMENT, FIRST, Raised(Cancelled("x"), True, Loss(LossKind.JOB_CANCELLED, "marker")), Drop(
        DropWhy.JOB_STOPPED, "stopped, its job was cancelled or has failed (marker)")),
    Case("lost job", SEGMENT, FIRST, Lost(Loss(LossKind.JOB_CANCELLED, "marker", token_cause="lost")), Drop(
        DropWhy.JOB_STOPPED, "stopped, its job was cancelled or has failed (marker)", cause="lost")),
    Case("raised after its loss", SEGMENT, FIRST, Raised(RuntimeError("x"), True, Loss(LossKind.TOKEN_GONE, "Gone")),
         Drop(DropWhy.TOKEN_GONE, "abandoned, its token is gone (Gone)")),
    Case("superseded", SEGMENT, FIRST, Lost(Loss(LossKind.SUPERSEDED, "copy 1 won")), Drop(
        DropWhy.SUPERSEDED, "stopped, copy 1 won")),
    Case("held while it ran", SEGMENT, SECOND, Lost(Loss(LossKind.HELD, "budget")), Resend(
        ResendWhy.HELD, "stopped: budget", 1, 0, 0)),
    Case("redelivered", SEGMENT, FIRST, Lost(Loss(LossKind.REDELIVERED, "receipt expired")), Abandon(
        "receipt expired")),
    Case("lost, no reason", SEGMENT, FIRST, Raised(Cancelled("x")), Abandon("no reason recorded")),
    # A task taken early that goes back unstarted.
    Case("unstarted", SEGMENT, FIRST, Unstarted(), GiveBack()),
    Case("unstarted on its last receive", SEGMENT, LAST, Unstarted(), Resend(ResendWhy.LAST_RECEIVE, "", 2, 0, 0)),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_decide_names_how_each_message_ends(case: Case) -> None:
    assert decide(case.task, case.delivery, case.happened, RULES) == case.outcome


def test_a_message_that_is_not_a_task_is_dropped_and_its_token_failed_with_the_reason() -> None:
    outcome = decide(None, None, Malformed(malformed()))
    assert isinstance(outcome, Drop) and outcome.why is DropWhy.MALFORMED
    assert outcome.detail == "1 errors" and str(outcome.cause).startswith(
        "the task message is invalid: 1 validation error"
    )


def test_the_table_covers_every_ending_and_every_why() -> None:
    outcomes = [case.outcome for case in CASES if case.outcome is not None] + [
        decide(None, None, Malformed(malformed()))
    ]
    assert {outcome.ending for outcome in outcomes} == set(Ending)
    assert {o.why for o in outcomes if isinstance(o, Resend)} == set(ResendWhy)
    assert {o.why for o in outcomes if isinstance(o, Drop)} == set(DropWhy)
    assert {kind.ending for kind in OUTCOMES} == set(Ending) and len(OUTCOMES) == len(Ending)


def test_a_presence_record_counts_failures_and_successes_only() -> None:
    assert ended_well(Succeeded(RESULT)) is True
    assert ended_well(RetryLater(FAILED, 2)) is False and ended_well(Fail(FAILED)) is False
    assert ended_well(Drop(DropWhy.BACKUP_GAVE_UP, "", FAILED)) is False
    assert ended_well(Drop(DropWhy.SUPERSEDED, "")) is None and ended_well(GiveBack()) is None


deliveries = st.builds(
    lambda receives, prior, limit: Delivery(prior + receives, receives, limit),
    st.integers(1, 6), st.integers(0, 8), st.none() | st.integers(1, 6),
)  # fmt: skip


@given(delivery=deliveries, forgiven=st.integers(0, 8), retryable=st.booleans())
def test_a_failure_is_retried_until_its_unforgiven_attempts_reach_the_limit_then_fails_its_token(
    delivery: Delivery, forgiven: int, retryable: bool
) -> None:
    task = Segment(task_token="t", prior_attempts=delivery.attempt - delivery.receive_count, forgiven_attempts=forgiven)
    error = SegmentFailed("x", final=not retryable)
    outcome = decide(task, delivery, Raised(error), RULES)
    counted = delivery.attempt - forgiven
    if retryable and counted < RULES.retry.max_attempts:
        assert outcome == RetryLater(
            Failure("SegmentFailed", "x", delivery.attempt), RULES.retry.delay_s(delivery.attempt)
        )
    else:
        # The token fails; the message goes to the dead letters only when its own receives ran out.
        assert isinstance(outcome, DeadLetter | Fail)
        assert isinstance(outcome, DeadLetter) == (retryable and delivery.receive_count >= RULES.retry.max_attempts)


@given(delivery=deliveries, saved=st.integers(0, 100), sent_with=st.integers(0, 100), failed=st.integers(0, 5))
def test_a_renewal_never_passes_the_delivery_cap_and_carries_what_was_saved(
    delivery: Delivery, saved: int, sent_with: int, failed: int
) -> None:
    task = Segment(task_token="t", prior_attempts=delivery.attempt - delivery.receive_count, progress_frames=sent_with)
    progress = Progress(saved, min(failed, len(delivery.earlier)))
    outcome = decide(task, delivery, Taken(standing=Standing(progress=progress)), RULES)
    if outcome is not None:
        assert isinstance(outcome, Resend) and outcome.why is ResendWhy.PROGRESS
        assert delivery.receive_limit is not None and delivery.receive_count >= delivery.receive_limit
        assert delivery.attempt < RULES.progress.max_deliveries
        assert outcome.progress_frames == saved and outcome.prior_attempts == delivery.attempt - 1
        assert outcome.forgiven_attempts <= outcome.prior_attempts


def documented(section: str) -> tuple[list[str], list[str], list[str]]:
    """The endings docs/layout.md lists (bold, one per item) and the whys of resend and drop (italic)."""
    endings, resend, drop = [], [], []
    for item in re.split(r"\n- ", section)[1:]:
        name = re.match(r"\*\*(.+?)\*\*", item)
        assert name, item
        endings.append(name.group(1))
        whys = re.findall(r"\*([^*]+)\*(?!\*)", item.replace(f"**{name.group(1)}**", ""))
        if name.group(1) == "resend":
            resend = whys
        if name.group(1) == "drop":
            drop = whys
    return endings, resend, drop


def test_docs_layout_lists_the_endings_the_code_has() -> None:
    text = (ROOT / "docs" / "layout.md").read_text()
    section = text[text.index("A message ends in one of these outcomes") : text.index("To the queue the worker says")]
    endings, resend, drop = documented(section)
    assert endings == [ending.value for ending in Ending]
    assert resend == [why.value for why in ResendWhy]
    assert drop == [why.value for why in DropWhy]
