"""The next segment's decoder starts while the current one renders (gpu_worker/rendering/prefetch.py): used when
its task comes, dropped when another does, and the output is the same either way."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from fleetctl.samples import read_stamp
from fusionfleet import layout
from fusionfleet.adapters.queues import SqsQueue
from fusionfleet.adapters.storage import S3Storage
from fusionfleet.media.decode import iter_frames
from fusionfleet.media.limits import MediaLimits
from fusionfleet.media.probe import probe_video
from fusionfleet.media.ranges import FileRangeSource, RangeReader
from fusionfleet.messages import JobContext, RenderTask
from gpu_worker.delivery.keeper import KeepPolicy
from gpu_worker.delivery.lookahead import LookaheadPolicy
from gpu_worker.delivery.loop import Worker
from gpu_worker.delivery.retry import RetryPolicy
from gpu_worker.delivery.tasks import RenderHandler
from gpu_worker.engines.pool import EnginePool
from gpu_worker.lifecycle.stopping import StopSignal
from gpu_worker.rendering.frames import LEAD_IN_FRAMES
from gpu_worker.rendering.prefetch import Prefetcher
from gpu_worker.rendering.render import InlineRenderer, RenderDeps
from gpu_worker.rendering.sources import SourceCache
from tests.integration.conftest import Aws
from tests.integration.test_worker_loop import job, plan, queue_every_segment, recorder

__all__ = ["job"]

pytestmark = pytest.mark.timeout(300)


def _worker(aws: Aws, tmp_path: Path, prefetch: Prefetcher) -> Worker[RenderTask]:
    storage = S3Storage(aws.s3)
    deps = RenderDeps(
        storage, EnginePool({}), SourceCache(storage, MediaLimits()), MediaLimits(), tmp_path, "prefetching",
        prefetch=prefetch,
    )  # fmt: skip
    handler = RenderHandler(InlineRenderer(deps), storage, "prefetching", threading.Event())
    urls = [aws.queues[name] for name in ("RenderQueueHigh", "RenderQueueNormal", "RenderQueueLow")]
    return Worker(
        "prefetching", urls, handler, SqsQueue(aws.sqs), recorder(aws), RetryPolicy(max_attempts=3, backoff_s=(0,)),
        KeepPolicy(visibility_s=60), StopSignal(), idle_wait_s=0, lookahead=LookaheadPolicy(1),
    )  # fmt: skip


def test_a_worker_that_takes_its_next_segment_early_decodes_it_ahead_and_renders_it_exactly(
    aws: Aws, job: JobContext, tmp_path: Path
) -> None:
    # GIVEN all of the job's segments queued, and a worker that takes its next task early
    segments = queue_every_segment(aws, job)
    prefetch = Prefetcher(S3Storage(aws.s3), LEAD_IN_FRAMES)
    subject = _worker(aws, tmp_path, prefetch)
    # WHEN it works through them
    assert subject.run(max_tasks=len(segments)) == len(segments)
    # THEN every task taken early had its decoder started ahead, and each was used when its turn came
    assert subject.lookahead.taken >= 1
    assert prefetch.prepared == subject.lookahead.taken and prefetch.used == prefetch.prepared
    # AND every segment holds exactly its own frames
    for segment in segments:
        record = json.loads(
            aws.s3.get_object(Bucket=aws.work_bucket, Key=layout.segment_record_key(job.job_id, segment["index"]))[
                "Body"
            ].read()
        )
        path = tmp_path / f"segment-{segment['index']}.mp4"
        aws.s3.download_file(aws.work_bucket, record["key"], str(path))
        info = probe_video(RangeReader(FileRangeSource(path), "s"), "s", MediaLimits())
        stamps = [read_stamp(image) for _, image in iter_frames(RangeReader(FileRangeSource(path), "s"), info, 0,
                                                                  info.frame_count)]  # fmt: skip
        assert stamps == list(range(segment["start_frame"], segment["end_frame"]))


def test_a_decoder_is_handed_only_to_its_own_task_and_dropped_for_another(aws: Aws, job: JobContext) -> None:
    # GIVEN a decoder started ahead for segment 0
    segments = plan(aws, job)
    tasks = [RenderTask.model_validate({"task_token": "t", "job": job.model_dump(mode="json"), "segment": s})
             for s in segments[:2]]  # fmt: skip
    prefetch = Prefetcher(S3Storage(aws.s3), LEAD_IN_FRAMES)
    prefetch.prepare(tasks[0])
    # WHEN segment 1 starts first (segment 0 was taken early while it was starting)
    # THEN nothing is handed over, and segment 0's decoder is kept for its turn
    assert prefetch.take(tasks[1]) is None and prefetch.used == 0
    assert [t for t in threading.enumerate() if t.name == "decode-ahead"]
    # AND when another task is prepared instead, segment 0's decoder is dropped, its thread gone
    prefetch.prepare(tasks[1])
    ahead = prefetch.take(tasks[1])
    assert ahead is not None and prefetch.take(tasks[1]) is None and prefetch.take(tasks[0]) is None
    assert len([t for t in threading.enumerate() if t.name == "decode-ahead"]) == 1
    ahead.close()
    prefetch.close()
    assert not [t for t in threading.enumerate() if t.name == "decode-ahead"]
