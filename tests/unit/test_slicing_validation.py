"""The slicer refuses a manifest's bad options before it looks at any media."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fusionfleet.errors import ObjectMissing
from fusionfleet.orchestrator import Execution, Progress
from fusionfleet.slicing import Slicer, SlicerConfig
from fusionfleet.storage import ObjectInfo

MEDIA, WORK = "media", "work"


@dataclass
class RecordingStorage:
    """In-memory objects; every call is recorded as (method, bucket, key)."""

    objects: dict[tuple[str, str], bytes] = field(default_factory=dict)
    calls: list[tuple[str, str, str]] = field(default_factory=list)

    def _get(self, bucket: str, key: str) -> bytes:
        try:
            return self.objects[bucket, key]
        except KeyError:
            raise ObjectMissing(f"s3://{bucket}/{key} does not exist") from None

    def head(self, bucket: str, key: str) -> ObjectInfo:
        self.calls.append(("head", bucket, key))
        data = self._get(bucket, key)
        return ObjectInfo(bucket, key, len(data), f"etag-{len(data)}", datetime(2025, 1, 1, tzinfo=UTC))

    def get_bytes(self, bucket: str, key: str) -> bytes:
        self.calls.append(("get_bytes", bucket, key))
        return self._get(bucket, key)

    def get_range(self, bucket: str, key: str, start: int, end: int) -> bytes:
        self.calls.append(("get_range", bucket, key))
        return self._get(bucket, key)[start:end]

    def put_bytes(self, bucket: str, key: str, data: bytes, content_type: str = "") -> str:
        self.calls.append(("put_bytes", bucket, key))
        self.objects[bucket, key] = data
        return "etag"

    def upload_file(self, bucket: str, key: str, path: Path, content_type: str = "") -> str:
        return self.put_bytes(bucket, key, path.read_bytes())

    def download_file(self, bucket: str, key: str, path: Path) -> None:
        self.calls.append(("download_file", bucket, key))
        path.write_bytes(self._get(bucket, key))

    def list_keys(self, bucket: str, prefix: str) -> list[str]:
        self.calls.append(("list_keys", bucket, prefix))
        return sorted(key for (b, key) in self.objects if b == bucket and key.startswith(prefix))

    def presign_get(self, bucket: str, key: str, expires_s: int) -> str:
        return f"https://{bucket}/{key}"

    def delete_prefix(self, bucket: str, prefix: str) -> int:
        self.calls.append(("delete_prefix", bucket, prefix))
        doomed = [(b, key) for (b, key) in self.objects if b == bucket and key.startswith(prefix)]
        for name in doomed:
            del self.objects[name]
        return len(doomed)


class RefusingOrchestrator:
    def start(self, state_machine_arn: str, name: str, payload: dict[str, Any]) -> str:
        raise AssertionError("a rejected job must not start an execution")

    def describe(self, execution_arn: str) -> Execution:
        raise NotImplementedError

    def progress(self, execution_arn: str) -> Progress | None:
        raise NotImplementedError

    def task_success(self, token: str, output: dict[str, Any]) -> None:
        raise NotImplementedError

    def task_failure(self, token: str, error: str, cause: str) -> None:
        raise NotImplementedError

    def heartbeat(self, token: str) -> None:
        raise NotImplementedError


@dataclass
class RecordingNotifier:
    published: list[dict[str, Any]] = field(default_factory=list)

    def publish(self, topic_arn: str, subject: str, message: dict[str, Any]) -> None:
        self.published.append(message)


def test_a_bad_encoder_option_is_refused_before_any_media_is_read() -> None:
    # GIVEN a manifest asking for an encoder the fleet lacks, with media that would all be fine
    storage = RecordingStorage()
    manifest = {
        "version": 1,
        "source": ["inputs/face.jpg"],
        "target": "inputs/clip.mp4",
        "options": {"output_video_encoder": "h264_nvenc", "output_video_fps": 30.0},
    }
    storage.objects[MEDIA, "jobs/nvenc.json"] = json.dumps(manifest).encode()
    storage.objects[MEDIA, "inputs/face.jpg"] = b"\xff\xd8 not read"
    storage.objects[MEDIA, "inputs/clip.mp4"] = b"not read either"
    notifier = RecordingNotifier()
    slicer = Slicer(storage, RefusingOrchestrator(), notifier, SlicerConfig(WORK, "arn:sm", "arn:topic"))
    # WHEN the slicer handles it
    outcome = slicer.handle(MEDIA, "jobs/nvenc.json")
    # THEN it is rejected with every encoder problem
    assert outcome.status == "rejected"
    assert "'h264_nvenc' is not available on this fleet" in outcome.reason
    assert "output_video_fps is not supported" in outcome.reason
    (notice,) = notifier.published
    assert len(notice["problems"]) == 2, notice
    # AND of the media bucket only the manifest was touched: no HEAD, GET or range read of the media
    media_calls = [(method, key) for method, bucket, key in storage.calls if bucket == MEDIA]
    assert media_calls == [("head", "jobs/nvenc.json"), ("get_bytes", "jobs/nvenc.json")]


def test_every_bad_face_image_is_named_in_one_rejection_before_the_target_is_probed() -> None:
    # GIVEN two source images that are not pictures and a reference that is empty
    storage = RecordingStorage()
    manifest = {"version": 1, "source": ["inputs/a.jpg", "inputs/b.jpg"], "target": "inputs/clip.mp4"}
    storage.objects[MEDIA, "jobs/faces.json"] = json.dumps({**manifest, "reference": "inputs/ref.jpg"}).encode()
    storage.objects[MEDIA, "inputs/a.jpg"] = b"shopping list"
    storage.objects[MEDIA, "inputs/b.jpg"] = b"more shopping"
    storage.objects[MEDIA, "inputs/ref.jpg"] = b""
    storage.objects[MEDIA, "inputs/clip.mp4"] = b"never probed"
    notifier = RecordingNotifier()
    slicer = Slicer(storage, RefusingOrchestrator(), notifier, SlicerConfig(WORK, "arn:sm", "arn:topic"))
    # WHEN the slicer handles the manifest
    outcome = slicer.handle(MEDIA, "jobs/faces.json")
    # THEN one rejection names all three images, and the target was never read
    assert outcome.status == "rejected"
    (notice,) = notifier.published
    assert [problem.split(" ")[0] for problem in notice["problems"]] == ["source[0]", "source[1]", "reference"]
    assert not [call for call in storage.calls if call[0] == "get_range"]
