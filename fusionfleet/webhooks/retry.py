"""When a webhook delivery is tried again, as data: a schedule of growing pauses, and which answers
are worth another try. Pure."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

# Pauses after the 1st, 2nd, … failed attempt: 9 attempts over about 3.9 hours, so a receiver that
# is down for an hour (a deploy, an outage) still gets every event. SQS holds a message invisible for
# at most 12 hours, and the queue keeps messages 4 days.
DEFAULT_DELAYS_S: tuple[int, ...] = (5, 30, 120, 300, 900, 1800, 3600, 7200)
MAX_DELAY_S = 12 * 3600


@dataclass(frozen=True)
class WebhookRetryPolicy:
    delays_s: tuple[int, ...] = DEFAULT_DELAYS_S
    # Each pause is stretched by up to this share, at random, so receivers that come back are not
    # hit by every waiting delivery in the same second.
    jitter: float = 0.1
    timeout_s: float = 10.0  # one attempt in all: connect, send, and the answer (fusionfleet.adapters.webhook_http)

    def __post_init__(self) -> None:
        if any(delay < 0 or delay > MAX_DELAY_S for delay in self.delays_s):
            raise ValueError(f"webhook retry delays are 0 to {MAX_DELAY_S} s: {self.delays_s}")
        if self.timeout_s <= 0:
            raise ValueError("a webhook attempt needs a positive timeout")

    @property
    def max_attempts(self) -> int:
        return len(self.delays_s) + 1

    @property
    def span_s(self) -> int:
        """How long after the first attempt the last one is made (without jitter)."""
        return sum(self.delays_s)


Outcome = Literal["delivered", "retry", "give_up"]


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    delay_s: int = 0  # for `retry`: how long the message stays invisible
    reason: str = ""


def retryable(status: int | None) -> bool:
    """5xx, 408, 429 and no answer at all (timeout, refused, reset) are tried again; other answers are final."""
    return status is None or status >= 500 or status in (408, 429)


def decide(
    status: int | None, attempt: int, policy: WebhookRetryPolicy, rand: Callable[[], float] = random.random
) -> Decision:
    """What follows attempt number `attempt` (1-based) that got `status` (None: no answer)."""
    if status is not None and 200 <= status < 300:
        return Decision("delivered")
    if status is not None and not retryable(status):
        why = "redirects are not followed" if 300 <= status < 400 else "the receiver refused it"
        return Decision("give_up", reason=f"answered {status}: {why}; not tried again")
    if attempt >= policy.max_attempts:
        return Decision("give_up", reason=f"no success after {attempt} attempts over {policy.span_s} s")
    base = policy.delays_s[attempt - 1]
    delay = min(MAX_DELAY_S, round(base * (1 + policy.jitter * rand())))
    return Decision("retry", delay_s=delay)
