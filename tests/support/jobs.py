"""Job contexts and plans built in memory, for tests that need a job but no media."""

from __future__ import annotations

from typing import Any

from fusionfleet.environment.api import ApiEnvironment
from fusionfleet.environment.slicer import SlicerEnvironment
from fusionfleet.environment.watchdog import WatchdogEnvironment
from fusionfleet.fleet.tenants import TenantLimits
from fusionfleet.jobs.encoding import EncoderSettings
from fusionfleet.jobs.plan import Segment
from fusionfleet.media.probe import VideoInfo
from fusionfleet.messages import JobContext, ObjectRef

MEDIA = "media"
WORK = "work"


def video(frame_count: int = 100, fps: int = 25) -> VideoInfo:
    return VideoInfo(
        container="mov", codec="h264", width=320, height=240, rotation=0, fps_num=fps, fps_den=1,
        frame_count=frame_count, duration_s=frame_count / fps, start_s=0.0, variable_frame_rate=False,
        size_bytes=100_000,
    )  # fmt: skip


def job_context(job_id: str = "clip-0123456789abcdef", frame_count: int = 100, **changes: Any) -> JobContext:
    info = video(frame_count)
    encoder = EncoderSettings(
        codec="libx264", profile="high", pix_fmt="yuv420p", crf=18, preset="veryfast", fps_num=info.fps_num,
        fps_den=info.fps_den, width=info.width, height=info.height, timescale=12800, keyint=50,
    )  # fmt: skip
    values: dict[str, Any] = {
        "job_id": job_id,
        "manifest": ObjectRef(bucket=MEDIA, key="jobs/clip.json", etag="e", size=10),
        "sources": (ObjectRef(bucket=MEDIA, key="inputs/face.jpg"),),
        "target": ObjectRef(bucket=MEDIA, key="inputs/clip.mp4", size=info.size_bytes),
        "output": ObjectRef(bucket=MEDIA, key="outputs/clip.mp4"),
        "work_bucket": WORK,
        "priority": "normal",
        "engine": "copy",
        "quality": "balanced",
        "options": {},
        "video": info,
        "encoder": encoder,
        "segment_count": 2,
        "frame_count": frame_count,
        "submitted_at": "2026-01-01T00:00:00+00:00",
    }
    values.update(changes)
    return JobContext(**values)


def halves(frame_count: int = 100, fps: int = 25) -> list[Segment]:
    """Two segments splitting [0, frame_count) in the middle."""
    middle = frame_count // 2
    us = 1_000_000 // fps
    return [
        Segment(0, 0, middle, 0, middle * us),
        Segment(1, middle, frame_count, middle * us, frame_count * us),
    ]


def slicer_config(work_bucket: str, state_machine_arn: str, topic_arn: str, **fields: Any) -> SlicerEnvironment:
    """The slicer's configuration for a test: its buckets and ARNs, a region, and any field given."""
    return SlicerEnvironment(
        region="us-east-1", work_bucket=work_bucket, state_machine_arn=state_machine_arn, topic_arn=topic_arn, **fields
    )


def tenant_fields(limits: TenantLimits) -> dict[str, int]:
    """The slicer configuration's fields that make these tenant limits."""
    return {"tenant_max_running_jobs": limits.max_running_jobs, "tenant_max_segments": limits.max_segments}


def watchdog_config(work_bucket: str, state_machine_arn: str, topic_arn: str, **fields: Any) -> WatchdogEnvironment:
    """The watchdog's configuration for a test: its bucket and ARNs, a region, and any field given."""
    return WatchdogEnvironment(
        region="us-east-1", work_bucket=work_bucket, state_machine_arn=state_machine_arn, topic_arn=topic_arn, **fields
    )


def api_config(
    media_bucket: str, work_bucket: str, state_machine_arn: str, topic_arn: str, **fields: Any
) -> ApiEnvironment:
    """The tenant API's configuration for a test: its buckets and ARNs, a region, and any field given."""
    return ApiEnvironment(
        region="us-east-1", media_bucket=media_bucket, work_bucket=work_bucket, state_machine_arn=state_machine_arn,
        topic_arn=topic_arn, **fields,
    )  # fmt: skip
