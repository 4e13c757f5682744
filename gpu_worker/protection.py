"""ECS task scale-in protection while a segment is in hand.

The render service scales in on the backlog (fusionfleet.autoscale); without protection ECS may stop
a task that is rendering, and its segment is redone elsewhere. The ECS agent's endpoint
(`$ECS_AGENT_URI/task-protection/v1/state`) protects the task from the start of a segment to its
end, with an expiry as a backstop for a worker that dies holding it. Outside ECS there is no agent
and nothing to do (the local autoscaler stops only idle workers itself).
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request

logger = logging.getLogger(__name__)


class TaskProtection:
    def __init__(self, agent_uri: str, expires_minutes: int = 60, timeout_s: float = 2.0) -> None:
        self._url = f"{agent_uri.rstrip('/')}/task-protection/v1/state"
        self._expires_minutes = expires_minutes
        self._timeout_s = timeout_s

    def hold(self) -> None:
        self._put({"ProtectionEnabled": True, "ExpiresInMinutes": self._expires_minutes})

    def release(self) -> None:
        self._put({"ProtectionEnabled": False})

    def _put(self, body: dict[str, object]) -> None:
        request = urllib.request.Request(
            self._url, data=json.dumps(body).encode(), method="PUT", headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s) as response:
                response.read()
        except (urllib.error.URLError, OSError):
            # Protection only spares a redo; a worker must render whether or not the agent answers.
            logger.warning("task protection %s not set", body, exc_info=True)
