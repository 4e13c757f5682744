"""A task for tests of the worker loop: what the loop reads of any task (fusionfleet.messages.Task) at
its defaults; a test's task model adds what its handler reads."""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel


class StubTask(BaseModel):
    task_token: str
    copy_number: int = 0
    prior_attempts: int = 0
    forgiven_attempts: int = 0
    progress_frames: int = 0

    @property
    def saves_progress(self) -> bool:
        return False

    @property
    def in_hand(self) -> str:
        return f"{self.task_token}:0"

    @property
    def engine(self) -> str | None:
        return None

    def resent(self, prior_attempts: int, forgiven_attempts: int, progress_frames: int) -> Self:
        counts = {"prior_attempts": prior_attempts, "forgiven_attempts": forgiven_attempts}
        return self.model_copy(update={**counts, "progress_frames": progress_frames})

    def wire_json(self) -> str:
        return self.model_dump_json()
