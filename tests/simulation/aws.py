"""The AWS the simulated parties talk to: S3 from the repository's fake, Step Functions modelled here.

S3 is `tests.support.fakes.FakeStorage` (conditional create and If-Match replace are atomic, as S3's
are), with two changes: objects are stamped with the virtual clock, and a listing may lag: a key
written less than `listing_lag_s` ago may be missing from LIST. S3's LIST is strongly consistent
today, so the lag is a fault stricter than AWS; the protocol must stay safe under it all the same.

Step Functions is a model of what the protocol relies on, no more: StartExecution is idempotent by
name (a name already used returns that execution, as the adapter makes of ExecutionAlreadyExists),
DescribeExecution sees every start and end at once, and ListExecutions is eventually consistent: it
shows each execution as it was `list_lag_s` ago (a start not yet listed, an end not yet seen). The
state machine itself (the Map, the tasks, the notices) is not run: an execution ends when the
schedule says it does. Task tokens are modelled (`issue_token`): each is answered once, and a late answer
or beat is TokenGone, as AWS's TaskTimedOut; a failed token fails its Map (`map_error`).

Every call passes the scheduler's checkpoint first, so the schedule interleaves the parties call by call.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fusionfleet.adapters.links import PresignedLink
from fusionfleet.adapters.orchestrator import Execution, ExecutionMissing, ExecutionStatus, Progress, execution_arn
from fusionfleet.adapters.storage import ObjectInfo, PresignedPost
from fusionfleet.errors import TokenGone
from tests.simulation.scheduler import Scheduler
from tests.support.fakes import Clock, FakeStorage


def stamp(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


class _ClockedStorage(FakeStorage):
    """The fake with its objects' LastModified on the virtual clock (a schedule replays to the byte)."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock

    def put_bytes(self, bucket: str, key: str, data: bytes, content_type: str = "application/octet-stream") -> str:
        etag = super().put_bytes(bucket, key, data, content_type)
        self._objects[(bucket, key)].last_modified = stamp(self.clock())
        return etag


class SimStorage:
    """The Storage protocol over the clocked fake, each call a checkpoint; LIST may lag (a fault)."""

    def __init__(self, scheduler: Scheduler, clock: Clock, faults: Counter[str]) -> None:
        self.inner = _ClockedStorage(clock)
        self._scheduler = scheduler
        self._clock = clock
        self._faults = faults
        self._born: dict[tuple[str, str], float] = {}
        self.listing_lag_s = 0.0

    def _call(self, name: str, bucket: str, key: str) -> None:
        self._scheduler.checkpoint(f"s3.{name} {bucket}/{key}")

    def _written(self, bucket: str, key: str) -> None:
        self._born.setdefault((bucket, key), self._clock())

    def head(self, bucket: str, key: str) -> ObjectInfo:
        self._call("head", bucket, key)
        return self.inner.head(bucket, key)

    def get_bytes(self, bucket: str, key: str) -> bytes:
        self._call("get", bucket, key)
        return self.inner.get_bytes(bucket, key)

    def get_range(self, bucket: str, key: str, start: int, end: int) -> bytes:
        self._call("get_range", bucket, key)
        return self.inner.get_range(bucket, key, start, end)

    def put_bytes(self, bucket: str, key: str, data: bytes, content_type: str = "application/octet-stream") -> str:
        self._call("put", bucket, key)
        self._written(bucket, key)
        return self.inner.put_bytes(bucket, key, data, content_type)

    def upload_file(
        self, bucket: str, key: str, path: Path, content_type: str = "application/octet-stream",
        tags: dict[str, str] | None = None,
    ) -> str:  # fmt: skip
        self._call("upload", bucket, key)
        self._written(bucket, key)
        return self.inner.upload_file(bucket, key, path, content_type, tags)

    def download_file(self, bucket: str, key: str, path: Path) -> None:
        self._call("download", bucket, key)
        self.inner.download_file(bucket, key, path)

    def _visible(self, bucket: str, keys: list[str]) -> list[str]:
        if not self.listing_lag_s:
            return keys
        horizon = self._clock() - self.listing_lag_s
        shown = [key for key in keys if self._born.get((bucket, key), 0.0) <= horizon]
        if len(shown) < len(keys):
            self._faults["s3_listing_lag"] += 1
        return shown

    def list_keys(self, bucket: str, prefix: str) -> list[str]:
        self._call("list", bucket, prefix)
        return self._visible(bucket, self.inner.list_keys(bucket, prefix))

    def list_after(self, bucket: str, prefix: str, after: str, max_keys: int) -> list[str]:
        self._call("list_after", bucket, prefix)
        return self._visible(bucket, self.inner.list_after(bucket, prefix, after, max_keys))

    def latest_change(self, bucket: str, prefix: str) -> datetime | None:
        self._call("latest_change", bucket, prefix)
        return self.inner.latest_change(bucket, prefix)

    def create(self, bucket: str, key: str, data: bytes, content_type: str = "application/json") -> bool:
        self._call("create", bucket, key)
        made = self.inner.create(bucket, key, data, content_type)
        if made:
            self._written(bucket, key)
        else:
            self._faults["conditional_write_lost"] += 1
        return made

    def get_tagged(self, bucket: str, key: str) -> tuple[bytes, str]:
        self._call("get_tagged", bucket, key)
        return self.inner.get_tagged(bucket, key)

    def replace(self, bucket: str, key: str, data: bytes, etag: str, content_type: str = "application/json") -> bool:
        self._call("replace", bucket, key)
        done = self.inner.replace(bucket, key, data, etag, content_type)
        if not done:
            self._faults["conditional_write_lost"] += 1
        return done

    def delete_prefix(self, bucket: str, prefix: str) -> int:
        self._call("delete", bucket, prefix)
        for found in [k for k in self._born if k[0] == bucket and k[1].startswith(prefix)]:
            del self._born[found]
        return self.inner.delete_prefix(bucket, prefix)

    # Signing is local arithmetic, not a call to AWS: no checkpoint.
    def presign_get(self, bucket: str, key: str, expires_s: int) -> str:
        return self.inner.presign_get(bucket, key, expires_s)

    def presign_post(
        self, bucket: str, key: str, expires_s: int, max_bytes: int, tags: dict[str, str]
    ) -> PresignedPost:
        return self.inner.presign_post(bucket, key, expires_s, max_bytes, tags)

    def presign_link(self, bucket: str, key: str, expires_s: int, download: bool = False) -> PresignedLink:
        return self.inner.presign_link(bucket, key, expires_s, download)


@dataclass
class _Execution:
    arn: str
    name: str
    payload: dict[str, Any]
    started_at: float
    ended_at: float | None = None
    status: str = "RUNNING"
    error: str | None = None
    output: dict[str, Any] | None = None  # what its notice states built (state_output's answer)
    map_error: tuple[str, str] | None = None  # (error, cause) of the task that failed its Map


@dataclass
class TaskToken:
    token: str
    arn: str
    index: int  # the Map item's (the segment's) index
    state: str = "waiting"  # waiting → succeeded | failed | map failed
    output: dict[str, Any] | None = None
    error: str | None = None
    cause: str | None = None
    answers: int = 0  # answers Step Functions took (the model refuses a second: never above 1)


class SimStepFunctions:
    """The Orchestrator protocol as a model: executions by name, a lagging list, ends set by the schedule."""

    def __init__(self, scheduler: Scheduler, clock: Clock, faults: Counter[str]) -> None:
        self._scheduler = scheduler
        self._clock = clock
        self._faults = faults
        self.executions: dict[str, _Execution] = {}
        self.tokens: dict[str, TaskToken] = {}
        self.list_lag_s = 0.0

    def start(self, state_machine_arn: str, name: str, payload: dict[str, Any]) -> str:
        self._scheduler.checkpoint(f"sfn.start {name}")
        arn = execution_arn(state_machine_arn, name)
        if arn not in self.executions:
            self.executions[arn] = _Execution(arn, name, payload, self._clock())
        return arn

    def describe(self, execution_arn: str) -> Execution:
        self._scheduler.checkpoint(f"sfn.describe {execution_arn.rsplit(':', 1)[-1]}")
        found = self.executions.get(execution_arn)
        if found is None:
            raise ExecutionMissing(execution_arn)
        return self._shown(found, found.status, with_input=True)

    def _shown(self, found: _Execution, status: str, with_input: bool = False) -> Execution:
        stopped = stamp(found.ended_at) if found.ended_at is not None and status != "RUNNING" else None
        ended = status != "RUNNING"
        return Execution(
            found.arn, status, stamp(found.started_at), stopped, error=found.error if ended else None,
            input=found.payload if with_input else None,
        )  # fmt: skip

    def list_executions(self, state_machine_arn: str, status: str) -> list[Execution]:
        self._scheduler.checkpoint(f"sfn.list {status}")
        horizon = self._clock() - self.list_lag_s
        listed = []
        for found in self.executions.values():
            if found.started_at > horizon:
                if status == "RUNNING":
                    self._faults["sfn_listing_lag"] += 1
                continue
            ended = found.ended_at is not None and found.ended_at <= horizon
            then = found.status if ended else "RUNNING"
            if then != found.status:
                self._faults["sfn_listing_lag"] += 1
            if then == status:
                listed.append(self._shown(found, then))
        return listed

    def running_executions(self, state_machine_arn: str) -> list[Execution]:
        return self.list_executions(state_machine_arn, ExecutionStatus.RUNNING)

    def progress(self, execution_arn: str) -> Progress | None:
        self._scheduler.checkpoint("sfn.map_run")
        return None

    def stop(self, execution_arn: str, error: str, cause: str) -> None:
        self._scheduler.checkpoint("sfn.stop")
        found = self.executions.get(execution_arn)
        if found is None:
            raise ExecutionMissing(execution_arn)
        self.end(execution_arn, "ABORTED", error)

    def state_output(self, execution_arn: str, state_names: tuple[str, ...]) -> dict[str, Any] | None:
        self._scheduler.checkpoint("sfn.history")
        found = self.executions.get(execution_arn)
        return found.output if found is not None else None

    # Task tokens (the Map's sendMessage.waitForTaskToken): each answered once. An answer or a beat on a token
    # answered already, or whose execution ended or whose Map gave up, is TaskTimedOut, as on AWS (the adapter
    # raises TokenGone); a token never issued is InvalidToken.
    def issue_token(self, arn: str, index: int) -> str:
        token = f"token-{len(self.tokens)}-{arn.rsplit(':', 1)[-1]}-{index}"
        self.tokens[token] = TaskToken(token, arn, index)
        return token

    def _waiting(self, token: str) -> TaskToken:
        found = self.tokens.get(token)
        if found is None:
            raise TokenGone(f"InvalidToken: {token}")
        if found.state != "waiting" or self.executions[found.arn].status != "RUNNING":
            self._faults["token_gone_answered"] += 1
            raise TokenGone(f"TaskTimedOut: {token} is {found.state}")
        return found

    def task_success(self, token: str, output: dict[str, Any]) -> None:
        self._scheduler.checkpoint("sfn.task_success")
        found = self._waiting(token)
        found.state, found.output = "succeeded", output
        found.answers += 1

    def task_failure(self, token: str, error: str, cause: str) -> None:
        self._scheduler.checkpoint("sfn.task_failure")
        found = self._waiting(token)
        found.state, found.error, found.cause = "failed", error, cause
        found.answers += 1
        # The Map tolerates no failed item: it fails, and its other iterations are stopped with it.
        for other in self.tokens.values():
            if other.arn == found.arn and other.state == "waiting":
                other.state = "map failed"
        self.executions[found.arn].map_error = (error, cause)

    def heartbeat(self, token: str) -> None:
        self._scheduler.checkpoint("sfn.heartbeat")
        self._waiting(token)

    # The schedule's side, not the protocol's.
    def end(self, arn: str, status: str, error: str | None = None) -> None:
        found = self.executions[arn]
        if found.status == "RUNNING":
            found.status, found.ended_at, found.error = status, self._clock(), error

    def running(self, name_prefix: str = "") -> list[str]:
        """The truth, no lag: names of the executions running now."""
        return [e.name for e in self.executions.values() if e.status == "RUNNING" and e.name.startswith(name_prefix)]
