"""What crosses the wire: the job context, the render and merge tasks and their results, segment records,
notifications."""

from __future__ import annotations

import json
from typing import Any, Literal, Protocol, Self

from pydantic import BaseModel, ConfigDict, Field

from fusionfleet.fleet.tenants import notice_tenant
from fusionfleet.jobs.encoding import EncoderSettings
from fusionfleet.jobs.image_output import ImageOutput
from fusionfleet.jobs.manifest import Priority, Quality
from fusionfleet.jobs.plan import Segment
from fusionfleet.jobs.states import AttemptStatus, NoticeStatus, RecordStatus
from fusionfleet.jobs.timeline import Timeline
from fusionfleet.media.info import AudioInfo, VideoInfo


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ObjectRef(_Model):
    bucket: str
    key: str
    etag: str = ""
    size: int = 0


class AudioSource(_Model):
    """The job's audio source: what FaceFusion's lip syncer hears, and what the output then carries
    (fusionfleet.media.source_audio). It is one of the manifest's sources; `sources` holds the face images."""

    file: ObjectRef
    info: AudioInfo


class FaceRef(_Model):
    """One person of a job with `faces` (fusionfleet.jobs.faces): the sources that go on them (indices
    into the job's `sources`) and their reference face, the face at `position` of `reference` (the
    user's image, or the target's frame `frame` as the slicer decoded it once for the job)."""

    sources: tuple[int, ...]
    reference: ObjectRef
    position: int = 0
    frame: int | None = None
    # A chain's step (fusionfleet.jobs.faces): its pass's own options, in place of the job's; None: the job's.
    options: dict[str, Any] | None = None


class BatchItem(_Model):
    """Where a job stands in its batch (fusionfleet.jobs.batches): every item is an ordinary job."""

    batch_id: str
    index: int
    # The item tells its batch when it ends but publishes no notice of its own (the batch's summary
    # lists it), unless the batch asked for every item's notice too.
    quiet: bool = True


class BatchEvent(_Model):
    """On the ingest queue beside S3's events: a batch's item ended (the state machine's `TellBatch`), or
    the watchdog's tick of a batch not yet ended. The slicer advances the batch on either."""

    batch_id: str
    event: Literal["ended", "tick"]
    job_id: str = ""  # the item that ended

    def wire(self) -> str:
        return json.dumps({"batch_event": self.model_dump()})


class JobContext(_Model):
    """Everything a worker needs about a job; carried in the execution input and in every task."""

    job_id: str
    manifest: ObjectRef
    sources: tuple[ObjectRef, ...]
    target: ObjectRef
    reference: ObjectRef | None = None
    # Without a reference image in reference mode: frame `reference_frame_number` of the whole target,
    # decoded once by the slicer, so every segment swaps the same person (fusionfleet.facefusion.reference).
    reference_frame: ObjectRef | None = None
    # Where the job's content-analysis verdict is kept, for engines that declare it job-level
    # (fusionfleet.jobs.decisions): made once over the whole target, read by every segment.
    content_analysis: ObjectRef | None = None
    audio: AudioSource | None = None
    output: ObjectRef
    work_bucket: str
    priority: Priority
    engine: str
    quality: Quality
    options: dict[str, Any]
    video: VideoInfo
    encoder: EncoderSettings
    segment_count: int
    frame_count: int  # the target frames the job renders (its trimmed range's)
    submitted_at: str
    run: int = 0  # 0, then 1, 2, … for each retry (fusionfleet.jobs.runs)
    tenant: str | None = None  # the T of a `tenants/T/jobs/` manifest; None for a single-tenant `jobs/` drop
    fleet_workers: int = 0  # the fleet its plan was sized for (fusionfleet.jobs.sizing); 0: a fixed plan
    # The frames rendered and the output's rate (trim, output_video_fps); None: the whole target at its rate.
    timeline: Timeline | None = None

    # An image target (its `video` is the image as one frame): how it is rendered and written.
    image: ImageOutput | None = None
    # A test render: the target's frames rendered, each a one-frame segment, written as images.
    trial_frames: tuple[int, ...] = ()
    # Several faces on several people (fusionfleet.jobs.faces): one entry per person.
    faces: tuple[FaceRef, ...] = ()
    batch: BatchItem | None = None  # an item of a batch

    @property
    def renders_stills(self) -> bool:
        """Its segments are pictures (an image target's, a test render's frames), not video."""
        return self.image is not None or bool(self.trial_frames)

    @property
    def frames(self) -> Timeline:
        """The job's timeline (jobs planned before it existed: the whole target, each frame once)."""
        if self.timeline is not None:
            return self.timeline
        num, den = self.video.fps_num, self.video.fps_den
        return Timeline(0, self.video.frame_count, num, den, num, den, "same")

    def output_frames(self, segment: Segment) -> int:
        """The output frames a segment makes (its target frames, repeated or dropped as the job's rate says)."""
        return self.frames.output_frames(segment.start_frame, segment.end_frame)


class Task(Protocol):
    """What the worker loop reads of any task it holds, whatever its role (RenderTask, MergeTask)."""

    @property
    def task_token(self) -> str: ...

    @property
    def copy_number(self) -> int:
        """0: the state machine's message; 1: the watchdog's backup copy of a straggler."""
        ...

    @property
    def prior_attempts(self) -> int:
        """Attempts made through earlier messages of this task (hand-backs, renewed deliveries)."""
        ...

    @property
    def forgiven_attempts(self) -> int:
        """Earlier deliveries the retry limit leaves out (they saved progress)."""
        ...

    @property
    def progress_frames(self) -> int:
        """Frames checkpointed when this message was sent."""
        ...

    @property
    def saves_progress(self) -> bool:
        """Its attempts checkpoint frames, so a delivery that saved some may be renewed."""
        ...

    @property
    def in_hand(self) -> str:
        """`<job_id>:<segment index>` or `<job_id>:merge`: how a worker's presence record names it."""
        ...

    @property
    def engine(self) -> str | None:
        """The engine that renders it; None for a task that renders nothing."""
        ...

    def resent(self, prior_attempts: int, forgiven_attempts: int, progress_frames: int) -> Self:
        """This task as a new message carrying these counts (a hand-back, a renewed delivery)."""
        ...

    def wire_json(self) -> str: ...


class RenderTask(_Model):
    task_token: str
    job: JobContext
    segment: Segment
    # 0: the state machine's message; 1: the watchdog's backup copy of a straggler (same token).
    # Workers older than these fields reject a backup as malformed: deploy workers first.
    copy_number: int = 0
    avoid_worker: str = ""  # a backup names the worker of the original, which releases it
    # Attempts made through earlier messages of this task: a blocklisted worker hands a task back
    # as a new message (so the release costs no SQS receive) and carries the count over.
    prior_attempts: int = 0
    # Set when a delivery that saved chunks is forgiven (gpu_worker.delivery.retry.renew_delivery): the frames
    # checkpointed when this message was sent, and the earlier deliveries the retry limit leaves out.
    progress_frames: int = 0
    forgiven_attempts: int = 0

    def wire_json(self) -> str:
        """The message body we send ourselves: fields added for backups and hand-backs are left out at
        their defaults, so a worker older than them can still read the message (models forbid unknown
        fields, and a worker fails the token of a message it cannot read)."""
        newer = {
            "copy_number": 0, "avoid_worker": "", "prior_attempts": 0, "progress_frames": 0, "forgiven_attempts": 0,
        }  # fmt: skip
        excluded: dict[str, Any] = {name: True for name, default in newer.items() if getattr(self, name) == default}
        if self.segment.warm_from is None:
            excluded["segment"] = {"warm_from": True}  # only a test render's segments have it
        return self.model_dump_json(exclude=excluded)

    def resent(self, prior_attempts: int, forgiven_attempts: int, progress_frames: int) -> RenderTask:
        counts = {"prior_attempts": prior_attempts, "forgiven_attempts": forgiven_attempts}
        return self.model_copy(update={**counts, "progress_frames": progress_frames})

    @property
    def saves_progress(self) -> bool:
        return True

    @property
    def in_hand(self) -> str:
        return f"{self.job.job_id}:{self.segment.index}"

    @property
    def engine(self) -> str:
        return self.job.engine


class _WholeJobTask(_Model):
    """A task for a whole job (its merge, its content analysis): never copied, keeps no checkpoints and
    carries no attempt counts; SQS's receive count is all it has (the Task properties below say so)."""

    task_token: str
    job: JobContext

    @property
    def copy_number(self) -> int:
        return 0

    @property
    def prior_attempts(self) -> int:
        return 0

    @property
    def forgiven_attempts(self) -> int:
        return 0

    @property
    def progress_frames(self) -> int:
        return 0

    @property
    def saves_progress(self) -> bool:
        return False

    def resent(self, prior_attempts: int, forgiven_attempts: int, progress_frames: int) -> Self:
        return self  # no counts to carry: the new message is the same task

    def wire_json(self) -> str:
        return self.model_dump_json()


class MergeTask(_WholeJobTask):
    """The merge of a job's segments."""

    @property
    def in_hand(self) -> str:
        return f"{self.job.job_id}:merge"

    @property
    def engine(self) -> None:
        return None


class AnalysisTask(_WholeJobTask):
    """A job's content analysis, its own step before the Map (fusionfleet.facefusion.content_analysis): sent to
    the job's render queue, so the workers that render its segments, with their engine, make its verdict.
    """

    step: Literal["content_analysis"] = "content_analysis"

    @property
    def in_hand(self) -> str:
        return f"{self.job.job_id}:analysis"

    @property
    def engine(self) -> str:
        return self.job.engine


def parse_render_queue_message(body: str) -> RenderTask | AnalysisTask:
    """A render queue's message: a segment to render, or a job's content analysis (it names its step)."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict) and "step" in data:
        return AnalysisTask.model_validate_json(body)
    return RenderTask.model_validate_json(body)


class SegmentRecord(_Model):
    """Written beside each segment output: the merge gate reads it (see DESIGN, failure semantics)."""

    # Render workers write it and the merge, watchdog and dashboards read it; during a rolling deploy
    # these run different versions, so a reader ignores fields a newer writer added.
    model_config = ConfigDict(extra="ignore", frozen=True)

    job_id: str
    index: int
    status: RecordStatus
    frames: int = 0
    key: str = ""
    error: str = ""
    reason: str = ""
    attempt: int = 1
    worker: str = ""
    resumed_from: int = -1  # first frame rendered by this attempt when earlier chunks were reused
    frames_rendered: int = 0  # a still's: every frame its engine rendered, a test render's warm-up included
    queued_s: float = 0.0  # from Step Functions sending the message to a worker taking it
    engine_s: float = 0.0
    total_s: float = 0.0
    started_at: float = 0.0
    finished_at: float = 0.0
    copy_number: int = 0  # the copy that won (1: the watchdog's backup of a straggler)
    # When the engine's part ended (its last frame made); the encoder's tail, the join, check, upload and commit
    # follow, beside the next segment's render when the worker looks ahead.
    rendered_at: float = 0.0
    # Seconds per stage of the engine's part (gpu_worker.rendering.stage_clock: read, decode, engine, encode,
    # upload, waits).
    stages: dict[str, float] = Field(default_factory=dict)
    # Bytes of the target this attempt read (a test render's proof that it did not read the whole video).
    bytes_read: int = 0


class SegmentHold(_Model):
    """The task token of a segment and who holds it since when (`…/r<run>-task.json`), written when
    an attempt of the original copy starts: the watchdog sends a straggler's backup with it."""

    task_token: str
    worker: str
    attempt: int
    started_at: float


class SegmentAttempt(_Model):
    """One attempt at a segment, as the worker that made it saw it: `fusionfleet logs` reads these.

    Readers of another version meet fields they do not know during a deploy: they ignore them.

    Written when the attempt starts (`running`) and again when it ends (`succeeded`, `failed`,
    `released` on a warm stop, `cancelled` when the job was cancelled or the hold lost,
    `superseded` when another copy of the segment committed its output first).
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    job_id: str
    index: int
    run: int = 0
    attempt: int = 1
    worker: str = ""
    status: AttemptStatus
    started_at: float = 0.0
    finished_at: float = 0.0
    queued_s: float = 0.0
    engine_s: float = 0.0
    frames: int = 0
    error: str = ""
    reason: str = ""
    copy_number: int = 0  # 1: the watchdog's backup copy of a straggler
    # What the attempt's worker costs (fusionfleet.jobs.cost): its capacity type and dollars per hour,
    # and while it runs, when it was last seen alive (a killed worker's attempt ends there).
    capacity: str = ""  # on-demand | spot; "" before workers stamped it
    hourly_price: float = 0.0  # 0: not stamped, priced by the stack's price for its capacity
    alive_at: float = 0.0


class WorkerBeat(_Model):
    """A worker's presence record (`work/_workers/<name>.json`), refreshed every few seconds."""

    name: str
    role: str
    engine: str = ""
    current: str | None = None  # `<job_id>:<segment index>` or `<job_id>:merge` while it works
    segments_done: int = 0
    segments_failed: int = 0
    started_at: float = 0.0
    last_beat: float = 0.0
    host: str = ""
    pid: int = 0


class SegmentResult(_Model):
    """A render task's output, sent to Step Functions with SendTaskSuccess."""

    index: int
    key: str
    frames: int
    engine_s: float
    copy_number: int = 0  # the copy whose output was committed


class OutputLocation(_Model):
    bucket: str
    key: str
    uri: str


class MergeTimings(_Model):
    render_s: float  # first segment started → last segment finished
    worker_s: float  # all segments' worker time, summed
    engine_s: float  # all segments' engine time, summed
    merge_s: float
    merge_started_at: float  # epoch seconds


class JobCost(_Model):
    """What a job cost: every attempt's worker time at its instance's price (fusionfleet.jobs.cost)."""

    engine_gpu_s: float  # the engine time of the attempts that succeeded: the GPU's useful work
    billed_gpu_s: float  # every attempt's worker time (failed, killed and backup copies too), summed
    gpu_hourly_price: float  # dollars per GPU-hour, on average over those attempts
    estimated_usd: float  # each attempt's worker time × its price, summed
    attempts: int = 0  # attempts counted
    wasted_usd: float = 0.0  # of estimated_usd: attempts that did not produce the segment's output
    usd_by_capacity: dict[str, float] = Field(default_factory=dict)  # on-demand / spot


class Preview(_Model):
    """A before/after contact sheet (JPEG): one row per sampled frame, the target left, the output right."""

    bucket: str
    key: str
    url: str
    url_expires_at: str  # ISO 8601 UTC: when `url` stops working (see fusionfleet.adapters.links)
    width: int
    height: int
    frames: tuple[int, ...]  # the frame numbers shown, top to bottom


class MergeResult(_Model):
    """A merge task's output; the state machine reads `$.merge.output`, `$.merge.timings.render_s`, …"""

    output: OutputLocation
    download_url: str
    # ISO 8601 UTC: when download_url stops working, the earlier of 24 h and the end of the merge
    # task's role session that signed it (fusionfleet.adapters.links).
    download_url_expires_at: str
    frames: int
    duration_s: float
    audio_tracks: int
    timings: MergeTimings
    cost: JobCost
    preview: Preview | None = None  # None when the preview could not be made; the job still succeeded


def rejection_notice(
    job_id: str, manifest: ObjectRef, reason: str, problems: tuple[str, ...], tenant: str | None = None
) -> dict[str, Any]:
    return {
        "status": NoticeStatus.FAILED,
        "stage": "validation",
        "job_id": job_id,
        "tenant": notice_tenant(tenant),
        "manifest": manifest.model_dump(),
        "error": "JobRejected",
        "reason": reason,
        "problems": list(problems),
    }
