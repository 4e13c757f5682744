"""In-memory fakes of the domain's small protocols (Storage, WorkQueue, Orchestrator, Notifier).

They behave like the services where the domain relies on it (missing objects raise ObjectMissing, a
stale receipt raises ReceiptExpired, a closed token raises TokenGone, a message stays invisible for
its visibility timeout on a clock the test controls) and record what was asked of them.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fusionfleet.adapters.links import PresignedLink, link_expiry
from fusionfleet.adapters.orchestrator import Execution, ExecutionMissing, ExecutionStatus, Progress, execution_arn
from fusionfleet.adapters.queues import QueueDepth, QueueMessage, ReceiptExpired
from fusionfleet.adapters.storage import ObjectInfo, PresignedPost
from fusionfleet.errors import ObjectMissing, TokenGone

EPOCH = 1_700_000_000.0


class Clock:
    """Epoch seconds that move only when the test says so."""

    def __init__(self, now: float = EPOCH) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class _Object:
    data: bytes
    content_type: str
    etag: str
    last_modified: datetime


class FakeStorage:
    """Storage in a dict; `reads` counts get_bytes/get_range/download_file calls per key."""

    def __init__(self) -> None:
        self._objects: dict[tuple[str, str], _Object] = {}
        self.reads: dict[str, int] = {}
        # Every call as (method, bucket, key or prefix), for tests of what was touched and in which order.
        self.calls: list[tuple[str, str, str]] = []
        self.tags: dict[tuple[str, str], dict[str, str]] = {}  # tags given on upload
        self._replacing = threading.Lock()
        self.conflicts = 0  # conditional replaces refused: another writer came first

    def _get(self, bucket: str, key: str) -> _Object:
        found = self._objects.get((bucket, key))
        if found is None:
            raise ObjectMissing(f"s3://{bucket}/{key} does not exist")
        self.reads[key] = self.reads.get(key, 0) + 1
        return found

    def head(self, bucket: str, key: str) -> ObjectInfo:
        self.calls.append(("head", bucket, key))
        found = self._objects.get((bucket, key))
        if found is None:
            raise ObjectMissing(f"s3://{bucket}/{key} does not exist")
        return ObjectInfo(bucket, key, len(found.data), found.etag, found.last_modified)

    def get_bytes(self, bucket: str, key: str) -> bytes:
        self.calls.append(("get_bytes", bucket, key))
        return self._get(bucket, key).data

    def get_range(self, bucket: str, key: str, start: int, end: int) -> bytes:
        self.calls.append(("get_range", bucket, key))
        return self._get(bucket, key).data[start:end] if end > start else b""

    def put_bytes(self, bucket: str, key: str, data: bytes, content_type: str = "application/octet-stream") -> str:
        self.calls.append(("put_bytes", bucket, key))
        etag = hashlib.md5(data, usedforsecurity=False).hexdigest()
        self._objects[(bucket, key)] = _Object(bytes(data), content_type, etag, datetime.now(UTC))
        return etag

    def upload_file(
        self,
        bucket: str,
        key: str,
        path: Path,
        content_type: str = "application/octet-stream",
        tags: dict[str, str] | None = None,
    ) -> str:
        if tags:
            self.tags[(bucket, key)] = dict(tags)
        return self.put_bytes(bucket, key, path.read_bytes(), content_type)

    def download_file(self, bucket: str, key: str, path: Path) -> None:
        self.calls.append(("download_file", bucket, key))
        path.write_bytes(self._get(bucket, key).data)

    def list_keys(self, bucket: str, prefix: str) -> list[str]:
        self.calls.append(("list_keys", bucket, prefix))
        return sorted(key for (name, key) in self._objects if name == bucket and key.startswith(prefix))

    def presign_get(self, bucket: str, key: str, expires_s: int) -> str:
        return f"https://{bucket}.fake/{key}?expires={expires_s}"

    def presign_post(
        self, bucket: str, key: str, expires_s: int, max_bytes: int, tags: dict[str, str]
    ) -> PresignedPost:
        return PresignedPost(f"https://{bucket}.fake/", {"key": key, "max_bytes": str(max_bytes), **tags})

    def presign_link(self, bucket: str, key: str, expires_s: int, download: bool = False) -> PresignedLink:
        # The fake's credentials never end: the link lasts what was asked.
        now = datetime.now(UTC)
        url = self.presign_get(bucket, key, expires_s) + ("&download=1" if download else "")
        return PresignedLink(url, link_expiry(now, expires_s))

    def latest_change(self, bucket: str, prefix: str) -> datetime | None:
        times = [
            o.last_modified for (name, key), o in self._objects.items() if name == bucket and key.startswith(prefix)
        ]
        return max(times, default=None)

    def create(self, bucket: str, key: str, data: bytes, content_type: str = "application/json") -> bool:
        if (bucket, key) in self._objects:
            return False
        self.put_bytes(bucket, key, data, content_type)
        return True

    def get_tagged(self, bucket: str, key: str) -> tuple[bytes, str]:
        self.calls.append(("get_tagged", bucket, key))
        found = self._get(bucket, key)
        return found.data, found.etag

    def replace(self, bucket: str, key: str, data: bytes, etag: str, content_type: str = "application/json") -> bool:
        with self._replacing:  # S3 checks If-Match and writes as one step
            found = self._objects.get((bucket, key))
            if found is None or found.etag != etag:
                self.conflicts += 1
                return False
            self.put_bytes(bucket, key, data, content_type)
            return True

    def list_after(self, bucket: str, prefix: str, after: str, max_keys: int) -> list[str]:
        self.calls.append(("list_after", bucket, prefix))
        keys = sorted(key for (name, key) in self._objects if name == bucket and key.startswith(prefix) and key > after)
        return keys[:max_keys]

    def delete_prefix(self, bucket: str, prefix: str) -> int:
        self.calls.append(("delete_prefix", bucket, prefix))
        keys = self.list_keys(bucket, prefix)
        for key in keys:
            del self._objects[(bucket, key)]
        return len(keys)

    # Test helpers, not part of the protocol.
    def put_json(self, bucket: str, key: str, value: Any) -> None:
        self.put_bytes(bucket, key, json.dumps(value).encode(), "application/json")

    def json(self, bucket: str, key: str) -> Any:
        return json.loads(self._objects[(bucket, key)].data)

    def exists(self, bucket: str, key: str) -> bool:
        return (bucket, key) in self._objects


@dataclass
class Queued:
    """One message in a modelled SQS queue."""

    message_id: str
    body: str
    sent_at: float
    visible_at: float
    receive_count: int = 0
    receipt: str = ""

    def deliver(self, queue_url: str, now: float, visibility_s: int) -> QueueMessage:
        """Receive it once more: a new receipt handle (the old one dies), invisible for `visibility_s`."""
        self.receive_count += 1
        self.receipt = f"{self.message_id}/{self.receive_count}"
        self.visible_at = now + visibility_s
        return QueueMessage(
            queue_url=queue_url,
            message_id=self.message_id,
            receipt_handle=self.receipt,
            body=self.body,
            receive_count=self.receive_count,
            sent_at=self.sent_at,
            received_at=now,
        )


@dataclass
class Queue:
    """A modelled SQS queue: its messages and its redrive (to `dead_letter_url`, or kept in `dead_letters`)."""

    max_receive_count: int | None
    dead_letter_url: str | None = None
    messages: list[Queued] = field(default_factory=list)
    dead_letters: list[Queued] = field(default_factory=list)

    def find(self, message: QueueMessage) -> Queued:
        """The message a receipt handle names; a stale handle raises ReceiptExpired, as SQS answers."""
        for queued in self.messages:
            if queued.message_id == message.message_id and queued.receipt == message.receipt_handle:
                return queued
        raise ReceiptExpired(message.message_id)

    def receive(self, queue_url: str, now: float, visibility_s: int, max_messages: int) -> list[QueueMessage]:
        """Up to `max_messages` visible messages, each delivered once more; one already received
        `max_receive_count` times moves to `dead_letters` instead (SQS's redrive)."""
        taken: list[QueueMessage] = []
        for queued in list(self.messages):
            if len(taken) >= max_messages:
                break
            if queued.visible_at > now:
                continue
            if self.max_receive_count is not None and queued.receive_count >= self.max_receive_count:
                self.messages.remove(queued)
                self.dead_letters.append(queued)
                continue
            taken.append(queued.deliver(queue_url, now, visibility_s))
        return taken


class FakeQueue:
    """SQS semantics that the worker relies on, on a test clock.

    A received message is invisible for its visibility timeout and gets a new receipt handle each
    time; an old handle raises ReceiptExpired. A message received more than the queue's
    max_receive_count times goes to the queue's dead letters instead of being delivered.
    `visibility_changes` records (message id, seconds) for every change_visibility call.
    """

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or Clock()
        self._queues: dict[str, Queue] = {}
        self._ids = itertools.count(1)
        self.visibility_changes: list[tuple[str, int]] = []
        self.deleted: list[str] = []

    def create(self, queue_url: str, max_receive_count: int | None = None) -> str:
        self._queues[queue_url] = Queue(max_receive_count)
        return queue_url

    def dead_letters(self, queue_url: str) -> list[str]:
        return [queued.body for queued in self._queues[queue_url].dead_letters]

    def receive(self, queue_url: str, wait_s: int, visibility_s: int, max_messages: int = 1) -> list[QueueMessage]:
        return self._queues[queue_url].receive(queue_url, self.clock(), visibility_s, max_messages)

    def delete(self, message: QueueMessage) -> None:
        queue = self._queues[message.queue_url]
        queue.messages.remove(queue.find(message))
        self.deleted.append(message.message_id)

    def change_visibility(self, message: QueueMessage, seconds: int) -> None:
        self._queues[message.queue_url].find(message).visible_at = self.clock() + seconds
        self.visibility_changes.append((message.message_id, seconds))

    def send(self, queue_url: str, body: str) -> str:
        message_id = f"m{next(self._ids)}"
        now = self.clock()
        self._queues[queue_url].messages.append(Queued(message_id, body, sent_at=now, visible_at=now))
        return message_id

    def depth(self, queue_url: str) -> QueueDepth:
        now = self.clock()
        messages = self._queues[queue_url].messages
        visible = sum(1 for queued in messages if queued.visible_at <= now)
        return QueueDepth(visible=visible, in_flight=len(messages) - visible)

    def max_receive_count(self, queue_url: str) -> int | None:
        return self._queues[queue_url].max_receive_count


class FakeOrchestrator:
    """Step Functions' start and callback API. Tokens in `gone` raise TokenGone on any callback.

    `calls` records ("success", token, output), ("failure", token, (error, cause)) and
    ("heartbeat", token, None) in order; `executions` maps execution ARNs to their input.
    """

    def __init__(self, gone: set[str] | None = None, gone_after: dict[str, int] | None = None) -> None:
        self.gone = set(gone or ())
        # Tokens that close after this many heartbeats (the one a worker sends when it takes the task
        # counts): a job stopped while its segment renders.
        self.gone_after = dict(gone_after or {})
        self.calls: list[tuple[str, str, Any]] = []
        self.executions: dict[str, dict[str, Any]] = {}
        self.starts: list[str] = []
        # What describe, progress and the watchdog's calls see, set by a test per execution ARN.
        self.states: dict[str, Execution] = {}
        self.map_progress: dict[str, Progress] = {}
        self.state_outputs: dict[str, dict[str, Any]] = {}
        self.stopped: list[tuple[str, str]] = []
        # How an execution ends when stopped, when not ABORTED: (status, error), e.g. a state machine
        # that reached its notice's claim as the stop landed and found the record taken.
        self.ends_on_stop: dict[str, tuple[str, str]] = {}

    def start(self, state_machine_arn: str, name: str, payload: dict[str, Any]) -> str:
        arn = execution_arn(state_machine_arn, name)
        self.starts.append(arn)
        # A second start with the same name finds the first execution, as Step Functions does.
        self.executions.setdefault(arn, payload)
        return arn

    def describe(self, execution_arn: str) -> Execution:
        payload = self.executions.get(execution_arn)
        if execution_arn in self.states:
            found = self.states[execution_arn]
            return found if found.input is not None or payload is None else replace(found, input=payload)
        if payload is None:
            raise ExecutionMissing(execution_arn)
        return Execution(arn=execution_arn, status="RUNNING", input=payload)

    def progress(self, execution_arn: str) -> Progress | None:
        return self.map_progress.get(execution_arn)

    def list_executions(self, state_machine_arn: str, status: str) -> list[Execution]:
        return [e for e in self.states.values() if e.status == status]

    def running_executions(self, state_machine_arn: str) -> list[Execution]:
        return self.list_executions(state_machine_arn, ExecutionStatus.RUNNING)

    def stop(self, execution_arn: str, error: str, cause: str) -> None:
        self.stopped.append((execution_arn, error))
        running = self.describe(execution_arn)
        status, error = self.ends_on_stop.get(execution_arn, ("ABORTED", error))
        self.states[execution_arn] = Execution(
            execution_arn, status, running.started, datetime.now(UTC), error=error, cause=cause, input=running.input
        )

    def state_output(self, execution_arn: str, state_names: tuple[str, ...]) -> dict[str, Any] | None:
        return self.state_outputs.get(execution_arn)

    def _callback(self, kind: str, token: str, detail: Any) -> None:
        if token in self.gone_after and kind == "heartbeat":
            self.gone_after[token] -= 1
            if self.gone_after[token] < 0:
                self.gone.add(token)
        elif token in self.gone_after and self.gone_after[token] <= 0:
            self.gone.add(token)
        self.calls.append((kind, token, detail))
        if token in self.gone:
            raise TokenGone(f"TaskTimedOut: token {token} is gone")

    def task_success(self, token: str, output: dict[str, Any]) -> None:
        self._callback("success", token, output)

    def task_failure(self, token: str, error: str, cause: str) -> None:
        self._callback("failure", token, (error, cause))

    def heartbeat(self, token: str) -> None:
        self._callback("heartbeat", token, None)

    def reports(self) -> list[tuple[str, str, Any]]:
        """The success and failure callbacks, heartbeats left out."""
        return [call for call in self.calls if call[0] != "heartbeat"]


class FakeNotifier:
    def __init__(self) -> None:
        self.published: list[tuple[str, str, dict[str, Any]]] = []

    def publish(self, topic_arn: str, subject: str, message: dict[str, Any]) -> None:
        self.published.append((topic_arn, subject, message))


class FakeCapacity:
    """GpuCapacity whose verdict the test sets; `asked` counts the checks."""

    def __init__(self, refusal: str | None = None) -> None:
        self.verdict = refusal
        self.asked = 0

    def refusal(self) -> str | None:
        self.asked += 1
        return self.verdict


@dataclass
class FakeWaker:
    """Records the segment counts the slicer woke the fleet for (fusionfleet.fleet.wake.FleetWaker)."""

    woken: list[int] = field(default_factory=list)

    def wake(self, segments: int) -> None:
        self.woken.append(segments)
