"""The render queue's handler passes every hook the worker's loop calls to the task's own handler."""

from __future__ import annotations

import inspect

from gpu_worker.delivery.render_queue import RenderQueueHandler
from gpu_worker.delivery.tasks import TaskHandler


def test_every_hook_of_a_task_handler_is_passed_on_not_left_at_its_default() -> None:
    # GIVEN every hook a TaskHandler has (those with a default: the loop calls them on any handler)
    hooks = {
        name
        for name, member in vars(TaskHandler).items()
        if inspect.isfunction(member) and not name.startswith("_") and name not in TaskHandler.__abstractmethods__
    }
    # THEN the render queue's handler defines each itself (a default would drop the render handler's:
    # its next segment's decoder, its tenant's budget hold, its attempts' billing)
    missing = sorted(hook for hook in hooks if hook not in vars(RenderQueueHandler))
    assert missing == [], missing
    assert hooks == {"standing", "note", "close"}


def test_a_task_handler_has_at_most_six_hooks() -> None:
    # What a role's handler must say; the rest is data (facts.Standing, facts.Names) or decided in one place
    # (outcomes.decide), so a new role does not have to know how a message ends.
    hooks = [name for name, member in vars(TaskHandler).items() if inspect.isfunction(member) and name[0] != "_"]
    assert sorted(hooks) == ["close", "describe", "note", "parse", "standing", "start"]
