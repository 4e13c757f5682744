"""Every AWS call a process makes, one JSON line each, for the IAM judge (a test instrument).

A botocore hook records what the call touches (service, operation, the parameters that name buckets,
keys, queues, topics, executions) and who makes it (the role of the process's AWS counterpart); the
judge (tests/support/iam/) turns each line into the IAM requests AWS would evaluate and evaluates them
against that role's policies in the SAM-transformed template. Bodies and messages are left out.
Presigned links and forms count as calls of the signer: AWS authorises them as the signer when used.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from fusionfleet.environment.contract import from_env
from fusionfleet.environment.recording import IamRecordingEnvironment

# Parameters that carry content, not what is touched: never written.
_CONTENT = frozenset({"Body", "MessageBody", "Message", "input", "output", "taskToken", "cause", "error", "Policy"})
_LONGEST = 2048


@dataclass
class CallRecorder:
    path: Path
    role: str
    process: str
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def attach(self, client: Any) -> None:
        """Record every call `client` makes (and every link or form it presigns) from now on."""
        meta = client.meta
        where = {"region": meta.region_name, "endpoint": meta.endpoint_url}
        service = meta.service_model.signing_name

        def before_parameter_build(params: Mapping[str, Any], model: Any, context: Mapping[str, Any], **_: Any) -> None:
            presigned = bool(context.get("is_presign_request"))
            if presigned and model.name == "CreateBucket":
                return  # generate_presigned_post's own serialisation: recorded by the wrapper below
            self.write(service, model.name, params, presigned, where)

        meta.events.register("before-parameter-build.*.*", before_parameter_build)
        if service == "s3":
            presign_post = client.generate_presigned_post

            def recorded_post(*args: Any, **kwargs: Any) -> Any:
                named = dict(zip(("Bucket", "Key", "Fields"), args, strict=False)) | kwargs
                target = {"Bucket": named.get("Bucket", ""), "Key": named.get("Key", "")}
                self.write("s3", "PresignedPost", {**target, **_form(named.get("Fields") or {})}, True, where)
                return presign_post(*args, **kwargs)

            client.generate_presigned_post = recorded_post

    def write(
        self, service: str, operation: str, params: Mapping[str, Any], presigned: bool, where: Mapping[str, Any]
    ) -> None:
        line = {
            "t": time.time(),
            "role": self.role,
            "process": self.process,
            "service": service,
            "operation": operation,
            "params": _kept(params),
            "presigned": presigned,
            **where,
        }
        text = json.dumps(line, sort_keys=True, default=str) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as out:
            out.write(text)


def _form(fields: Mapping[str, Any]) -> dict[str, Any]:
    """What a POST form sets that IAM judges: a tagging field needs s3:PutObjectTagging."""
    return {"Tagging": str(fields["tagging"])} if "tagging" in fields else {}


def _kept(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _kept(v) for k, v in value.items() if k not in _CONTENT}
    if isinstance(value, list | tuple):
        return [_kept(item) for item in value]
    if isinstance(value, str):
        return value[:_LONGEST]
    if isinstance(value, bool | int | float) or value is None:
        return value
    return type(value).__name__  # a file or bytes: content, not a name


def recorder_for(env: Mapping[str, str], argv: list[str], pid: int) -> CallRecorder | None:
    """The recorder the environment asks for, or None (the usual case: nothing is recorded)."""
    settings = from_env(IamRecordingEnvironment, env)
    if settings.record_dir is None or not settings.role:
        return None
    process = settings.process or _named(argv) or (Path(argv[0]).stem if argv else "process")
    settings.record_dir.mkdir(parents=True, exist_ok=True)
    return CallRecorder(settings.record_dir / f"calls-{_safe(process)}-{pid}.jsonl", settings.role, process)


@cache
def process_recorder() -> CallRecorder | None:
    """This process's recorder, read once from its environment (set by the local stack per process)."""
    return recorder_for(os.environ, list(sys.argv), os.getpid())


def _named(argv: list[str]) -> str | None:
    """The value of a `--name` argument (how the local stack names each process)."""
    for index, item in enumerate(argv[:-1]):
        if item == "--name":
            return argv[index + 1]
    return None


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
