"""ECS task scale-in protection while the worker holds a segment.

Service auto scaling and deployments stop tasks when the backlog drops; without protection they may
pick one that is rendering, which then releases its segment (SIGTERM) and another worker starts it
over. On ECS the container agent offers `$ECS_AGENT_URI/task-protection/v1/state`: the worker sets
protection when it takes a task, renews it with the task's heartbeat, and clears it when it finds the
queues empty. Locally (no ECS_AGENT_URI) protection is a no-op.

Protection is a courtesy, never a reason to fail work: an agent that refuses (no permission, not a
service task) is logged, and a stopped task still releases its segment.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

logger = logging.getLogger(__name__)

STATE_PATH = "/task-protection/v1/state"
MAX_MINUTES = 2880  # the agent's limit (48 h)


class TaskProtection(Protocol):
    def protect(self) -> None:
        """Protect the task; renews when due, so it may be called at every heartbeat."""

    def unprotect(self) -> None:
        """Let the task be stopped again (the worker is idle)."""


class NoProtection:
    """Where nothing stops tasks by scale-in (the local stack): nothing to do."""

    def protect(self) -> None:
        return None

    def unprotect(self) -> None:
        return None


@dataclass(frozen=True)
class ProtectionPolicy:
    """How long one grant lasts and when it is renewed, from the hold's own clocks.

    A held message goes unseen for at most `visibility + beat` (a beat may be missed once); a grant
    lasts twice that, rounded up to whole minutes, and is renewed once that window has passed, so a
    missed renewal still leaves a full window. A hung worker stops renewing and its protection lapses
    within minutes, as its message reappears for another worker.
    """

    expires_minutes: int
    renew_after_s: float

    @classmethod
    def for_keeping(cls, visibility_s: int, beat_s: float) -> ProtectionPolicy:
        window = visibility_s + beat_s
        minutes = min(MAX_MINUTES, max(1, math.ceil(2 * window / 60)))
        return cls(expires_minutes=minutes, renew_after_s=min(window, minutes * 60 / 2))


class ProtectionRefused(Exception):
    """The agent did not grant the request (HTTP error, a failure or error in its answer)."""


class EcsTaskProtection:
    """The ECS container agent's task protection endpoint, over plain HTTP (it is link-local)."""

    def __init__(
        self,
        agent_uri: str,
        policy: ProtectionPolicy,
        timeout_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._url = agent_uri.rstrip("/") + STATE_PATH
        self._policy = policy
        self._timeout_s = timeout_s
        self._clock = clock
        # The loop and the heartbeat thread both call in; one request at a time, state kept consistent.
        self._lock = threading.Lock()
        self._renew_at: float | None = None  # None: not protected (as far as this worker asked)

    @property
    def protected(self) -> bool:
        return self._renew_at is not None

    def protect(self) -> None:
        with self._lock:
            if self._renew_at is not None and self._clock() < self._renew_at:
                return
            try:
                self._put({"ProtectionEnabled": True, "ExpiresInMinutes": self._policy.expires_minutes})
            except ProtectionRefused as error:
                # Tried again at the next heartbeat; the work goes on unprotected meanwhile.
                logger.warning("task scale-in protection not set: %s", error)
                return
            self._renew_at = self._clock() + self._policy.renew_after_s

    def unprotect(self) -> None:
        with self._lock:
            if self._renew_at is None:
                return
            self._renew_at = None
            try:
                self._put({"ProtectionEnabled": False})
            except ProtectionRefused as error:
                # It lapses by itself within expires_minutes.
                logger.warning("task scale-in protection not cleared: %s", error)

    def _put(self, body: dict[str, object]) -> None:
        request = urllib.request.Request(
            self._url, data=json.dumps(body).encode(), method="PUT", headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s) as response:
                answer = response.read()
        except urllib.error.HTTPError as error:
            raise ProtectionRefused(f"HTTP {error.code}: {_detail(error.read())}") from error
        except (OSError, TimeoutError) as error:
            raise ProtectionRefused(f"the agent did not answer: {error}") from error
        # The agent answers {"protection": {...}} or, with a 200 too, {"failure": {...}}.
        parsed = _json(answer)
        if "protection" not in parsed:
            raise ProtectionRefused(_detail(answer))


def _json(data: bytes) -> dict[str, object]:
    try:
        value = json.loads(data or b"{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _detail(data: bytes) -> str:
    parsed = _json(data)
    for field in ("failure", "error"):
        found = parsed.get(field)
        if isinstance(found, dict):
            return f"{field}: " + ", ".join(f"{k}={v}" for k, v in found.items())
    return data[:200].decode(errors="replace") or "empty answer"


def task_protection(agent_uri: str | None, visibility_s: int, beat_s: float) -> TaskProtection:
    """The agent's endpoint on ECS (ECS_AGENT_URI set), a no-op elsewhere."""
    if not agent_uri:
        return NoProtection()
    return EcsTaskProtection(agent_uri, ProtectionPolicy.for_keeping(visibility_s, beat_s))
