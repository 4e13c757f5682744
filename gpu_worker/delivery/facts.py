"""What a role's handler tells the loop about a task, as data (gpu_worker.delivery.tasks.TaskHandler), and what the
loop tells the handler happened to it: read by `outcomes.decide`, written by `settle`, never a queue action.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusionfleet.jobs.failures import segment_failure


@dataclass(frozen=True)
class Names:
    """How the logs name a task (`segment 3 of clip-1`), and how its failure cause does: with its frames and
    attempts (`segment 3 (frames 75-99) of clip-1 failed after 3 attempts: …`), or, without `failed_as`,
    its name and the reason alone (`merge of clip-1: …`)."""

    what: str
    failed_as: str | None = None

    def cause(self, error: str, reason: str, attempts: int) -> str:
        """The cause a task that failed for good fails its token with. Pure."""
        if self.failed_as is None:
            return f"{self.what}: {reason}"
        return segment_failure(self.failed_as, attempts, error, reason)


@dataclass(frozen=True)
class Progress:
    """A task's progress on its last delivery: frames checkpointed now, and how many of this message's earlier
    attempts ended in a recorded failure (the rest died or were stopped)."""

    saved_frames: int
    failed_attempts: int


@dataclass(frozen=True)
class Standing:
    """What a task's job and records say of it now: read when it is taken and every few seconds while it runs.

    `stopped`: its job was cancelled or has failed; `token_cause`: what a stopped job's task fails its token
    with (None: the token is only woken: a cancel stops the execution itself, a backup copy never holds the
    token's last word); `superseded`: why this copy's work is pointless (the other copy committed first);
    `held`: why its tenant's budget holds it; `progress`: read only when asked for.
    """

    stopped: bool = False
    token_cause: str | None = None
    superseded: str | None = None
    held: str | None = None
    progress: Progress | None = None


# What the loop tells a handler happened to its task (TaskHandler.note): its records and preparations.


@dataclass(frozen=True)
class Next:
    """The task was taken early and starts next: prepare for it meanwhile (a render starts its decoder)."""


@dataclass(frozen=True)
class Alive:
    """The task in hand is still being worked on (every few seconds while it is)."""


@dataclass(frozen=True)
class Failure:
    """An attempt failed: the error's name and reason, which attempt, and whether the segment's records keep it."""

    error: str
    reason: str
    attempt: int
    recorded: bool = True


@dataclass(frozen=True)
class JobLost:
    """The task failed for good: its job is lost (`cause`), and its other tasks should stop."""

    error: str
    cause: str
    attempts: int


Note = Next | Alive | Failure | JobLost
