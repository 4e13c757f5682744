"""Actors: the real code of one party (a slicer invocation, an admitter, a reader) run step by step.

Each actor runs in a greenlet of its own, so only one party ever runs at a time and switching is a
function call (no OS threads to schedule on a loaded machine). An actor stops before every call it
makes to AWS (the gated storage and orchestrator call `checkpoint`), so a schedule decides which
party's next call happens next, and the same schedule always gives the same interleaving. Killing an
actor makes its next call raise `Killed`, and every call after that too: a killed process does nothing
more, not even its `finally` blocks' writes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import greenlet  # type: ignore[import-untyped]  # ships no type hints


class Killed(BaseException):
    """The actor's process died here; a BaseException so that the code's `except Exception` does not catch it."""


@dataclass
class Actor:
    actor_id: int
    kind: str  # "slicer", "reader", "admitter", …
    subject: str  # the job, batch or tenant it works on
    started_at: float
    state: str = "ready"  # ready → paused ↔ running → done | failed | killed
    next_call: str = "(start)"
    calls: int = 0
    result: Any = None
    error: BaseException | None = None
    kill_requested: bool = False
    glet: greenlet.greenlet | None = None

    @property
    def live(self) -> bool:
        return self.state in ("ready", "paused")


class Scheduler:
    """Owns the actors; `step` runs one actor up to its next call to AWS."""

    def __init__(self) -> None:
        self.actors: list[Actor] = []
        self._by_greenlet: dict[greenlet.greenlet, Actor] = {}
        self._main = greenlet.getcurrent()

    def spawn(self, kind: str, subject: str, now: float, work: Callable[[], Any]) -> Actor:
        actor = Actor(len(self.actors), kind, subject, now)

        def run() -> None:
            try:
                if actor.kill_requested:
                    raise Killed
                actor.state = "running"
                actor.result = work()
                actor.state = "done"
            except Killed:
                actor.state = "killed"
            except Exception as error:  # what the party would log and its trigger would retry
                actor.error = error
                actor.state = "failed"

        actor.glet = greenlet.greenlet(run, parent=self._main)
        self._by_greenlet[actor.glet] = actor
        self.actors.append(actor)
        return actor

    def live(self, kind: str | None = None) -> list[Actor]:
        return [a for a in self.actors if a.live and (kind is None or a.kind == kind)]

    def step(self, actor: Actor) -> None:
        """Let the actor make its pending call and run on to the one after it (or to its end)."""
        assert actor.live and actor.glet is not None, actor
        actor.glet.switch()

    def kill(self, actor: Actor) -> None:
        assert actor.live, actor
        actor.kill_requested = True
        self.step(actor)

    def finish(self, actor: Actor, max_steps: int = 10_000) -> None:
        """Run one actor to its end with nobody else moving (a party that is not interrupted)."""
        for _ in range(max_steps):
            if not actor.live:
                return
            self.step(actor)
        raise RuntimeError(f"{actor.kind} {actor.actor_id} made more than {max_steps} calls")

    def close(self) -> None:
        """Kill what still runs (the schedule ended)."""
        for actor in self.actors:
            if actor.live:
                self.kill(actor)
        self._by_greenlet.clear()

    def checkpoint(self, call: str) -> None:
        """Called before every gated call: an actor stops here until it is stepped; the scheduler's own
        code (set-up, invariants) passes straight through."""
        actor = self._by_greenlet.get(greenlet.getcurrent())
        if actor is None:
            return
        if actor.kill_requested:
            raise Killed
        actor.next_call = call
        actor.state = "paused"
        self._main.switch()
        if actor.kill_requested:
            raise Killed
        actor.state = "running"
        actor.calls += 1
