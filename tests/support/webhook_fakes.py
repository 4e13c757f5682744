"""Fakes of the webhooks' small protocols: the secret store, the ordered queue and the HTTP sender."""

from __future__ import annotations

from dataclasses import dataclass, field

from fusionfleet.adapters.webhook_http import Answer
from fusionfleet.webhooks.addresses import WebhookTarget


class FakeSecretStore:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.creates = 0

    def get(self, name: str) -> str | None:
        return self.values.get(name)

    def create(self, name: str, value: str, description: str) -> bool:
        self.creates += 1
        if name in self.values:
            return False
        self.values[name] = value
        return True


@dataclass
class Sent:
    queue_url: str
    body: str
    group: str
    dedup: str


class FakeOrderedQueue:
    """Keeps what was sent; drops a deduplication id seen before, as SQS FIFO does within five minutes."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self._seen: set[str] = set()

    def send_ordered(self, queue_url: str, body: str, group: str, dedup: str) -> None:
        if dedup in self._seen:
            return
        self._seen.add(dedup)
        self.sent.append(Sent(queue_url, body, group, dedup))


@dataclass
class Posted:
    target: WebhookTarget
    body: bytes
    headers: dict[str, str]


@dataclass
class FakeSender:
    """Answers each post with the next status of `statuses` (None: no answer), then 200."""

    statuses: list[int | None] = field(default_factory=list)
    posts: list[Posted] = field(default_factory=list)

    def post(self, target: WebhookTarget, body: bytes, headers: dict[str, str], timeout_s: float) -> Answer:
        self.posts.append(Posted(target, body, dict(headers)))
        status = self.statuses.pop(0) if self.statuses else 200
        error = "" if status is not None and status < 300 else ("timed out" if status is None else "oops")
        return Answer(status, error, 0.01, target.address)
