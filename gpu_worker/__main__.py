"""`python -m gpu_worker` (also `fusionfleet-worker`): a long-running render or merge worker.

`python -m gpu_worker swap …` renders one video on this machine without any cloud part.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.adapters.orchestrator import StepFunctions
from fusionfleet.adapters.ordered_queue import SqsOrderedQueue
from fusionfleet.adapters.queues import SqsQueue
from fusionfleet.adapters.storage import S3Storage
from fusionfleet.environment.settings import CUDA_VISIBLE_DEVICES
from fusionfleet.fleet.blocklist import BlockPolicy
from fusionfleet.messages import MergeTask
from fusionfleet.webhooks.outbox import WebhookOutbox
from gpu_worker import config as worker_config
from gpu_worker.delivery.accounting import Billing
from gpu_worker.delivery.analysis_task import AnalysisHandler
from gpu_worker.delivery.blocklist import Blocklist
from gpu_worker.delivery.keeper import KeepPolicy
from gpu_worker.delivery.lookahead import LookaheadPolicy
from gpu_worker.delivery.loop import Worker
from gpu_worker.delivery.render_queue import RenderQueueHandler, RenderQueueTask
from gpu_worker.delivery.retry import RetryPolicy
from gpu_worker.delivery.tasks import MergeHandler, Renderer, RenderHandler, TaskHandler, TaskT
from gpu_worker.delivery.token_actions import token_grace_s
from gpu_worker.engines.base import EngineUnavailable
from gpu_worker.engines.facefusion import startup as facefusion_startup
from gpu_worker.errors import ConfigError
from gpu_worker.hosting.engine_host import EngineHost, HostPolicy, default_gpu_limit_mb
from gpu_worker.lifecycle import per_gpu
from gpu_worker.lifecycle.capacity import gpu_capacity, total_gpu_mib
from gpu_worker.lifecycle.presence import Presence
from gpu_worker.lifecycle.protection import task_protection
from gpu_worker.lifecycle.retirement import EcsRetirement, NeverRetire, Retirement, metadata_task
from gpu_worker.lifecycle.stopping import StopSignal
from gpu_worker.merging.merge import MergeDeps
from gpu_worker.rendering.render import InlineRenderer, build_render_deps, finish_segment


def build_worker(
    settings: worker_config.WorkerEnvironment, stop: StopSignal
) -> Worker[RenderQueueTask] | Worker[MergeTask]:
    aws = AwsTarget(region=settings.region, endpoint_url=settings.endpoint_url)
    storage = S3Storage(aws.client("s3"))
    queue = SqsQueue(aws.client("sqs"))
    settings.scratch.mkdir(parents=True, exist_ok=True)
    if settings.role == "render":
        if settings.cpu_threads:
            # The engine process inherits these: numeric libraries keep to the worker's share too.
            for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
                os.environ.setdefault(variable, str(settings.cpu_threads))
        host = worker_config.host_config(settings)
        renderer: Renderer
        if settings.isolation == "inline":
            renderer = InlineRenderer(build_render_deps(host))
            if settings.preload_engine:
                renderer.deps.engines.get(settings.preload_engine)
            if renderer.deps.liveness is not None:
                renderer.deps.liveness.idle()  # loaded (lifecycle/liveness.py)
        else:
            renderer = host_process = EngineHost(
                host,
                HostPolicy(
                    max_tasks=settings.engine_max_tasks,
                    max_rss_mb=settings.engine_max_rss_mb,
                    max_gpu_mb=settings.engine_max_gpu_mb
                    if settings.engine_max_gpu_mb is not None
                    else default_gpu_limit_mb(total_gpu_mib(settings.visible_gpus)),
                    seconds_per_frame=settings.seconds_per_frame,
                    base_timeout_s=settings.base_timeout_s,
                ),
                lambda frames, attempt: finish_segment(frames, storage, settings.name, attempt).output,
            )
            host_process.start()
        blocklist = (
            Blocklist(storage, settings.name, BlockPolicy(settings.block_after_failures, settings.block_grace_s))
            if settings.work_bucket and settings.block_after_failures > 0
            else None
        )
        events = None
        if settings.webhook_queue_url and settings.work_bucket:
            ordered = SqsOrderedQueue(aws.client("sqs"))
            events = WebhookOutbox(ordered, settings.webhook_queue_url, storage, settings.work_bucket)
        billing = Billing(storage, settings.capacity, settings.prices)
        render = RenderHandler(renderer, storage, settings.name, stop.requested, blocklist, billing, events)
        # The render queues also carry FaceFusion jobs' content analyses (their own step, before the Map).
        handler = RenderQueueHandler(render, AnalysisHandler(renderer, storage, stop.requested))
        return _worker(settings, stop, handler, aws, storage, queue)
    merge = MergeHandler(MergeDeps(storage, settings.scratch, prices=settings.prices))
    return _worker(settings, stop, merge, aws, storage, queue)


def _retirement(settings: worker_config.WorkerEnvironment, aws: AwsTarget) -> Retirement:
    if not settings.ecs_metadata_uri:
        return NeverRetire()
    uri = settings.ecs_metadata_uri
    return EcsRetirement(aws.client("ecs"), lambda: metadata_task(uri))


def _worker(
    settings: worker_config.WorkerEnvironment, stop: StopSignal, handler: TaskHandler[TaskT], aws: AwsTarget,
    storage: S3Storage, queue: SqsQueue,
) -> Worker[TaskT]:  # fmt: skip
    # The queue's own redrive policy says how many attempts a message gets: one source of truth.
    attempts = queue.max_receive_count(settings.queue_urls[0]) or 3
    presence = None
    if settings.work_bucket:
        presence = Presence(
            storage, settings.work_bucket, settings.name, settings.role,
            engine=settings.preload_engine or ("ffmpeg" if settings.role == "merge" else ""), every_s=settings.beat_s,
        )  # fmt: skip
    keep = KeepPolicy(visibility_s=settings.visibility_s)
    return Worker(
        name=settings.name,
        queue_urls=settings.queue_urls,
        handler=handler,
        queue=queue,
        orchestrator=StepFunctions(aws.client("stepfunctions")),
        token_grace_s=token_grace_s(settings.endpoint_url),
        retry=RetryPolicy(max_attempts=attempts),
        keep=keep,
        stop=stop,
        idle_wait_s=settings.idle_wait_s,
        presence=presence,
        protection=task_protection(settings.ecs_agent_uri, keep.visibility_s, keep.interval_s()),
        retirement=_retirement(settings, aws),
        capacity=gpu_capacity(settings.min_free_gpu_mb, settings.visible_gpus)
        if settings.min_free_gpu_mb is not None and settings.role == "render"
        else None,
        lookahead=LookaheadPolicy(
            settings.lookahead_min_backlog if settings.role == "render" else 0,
            # One idle poll and a second's margin: by then every idle worker has seen the visible messages.
            settle_s=settings.idle_wait_s + 1.0,
        ),
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s [%(process)d] %(message)s", stream=sys.stderr
    )
    if argv[:1] == ["swap"]:
        from gpu_worker.standalone import main as swap_main

        return int(swap_main(argv[1:]))
    parser = argparse.ArgumentParser(prog="fusionfleet-worker", description=__doc__)
    worker_config.add_arguments(parser)
    try:
        args = parser.parse_args(argv)
        settings = worker_config.resolve(args)
    except ConfigError as error:
        print(f"{parser.prog}: error: {error.reason}", file=sys.stderr)
        return 2
    if args.per_gpu and settings.role == "render":
        gpus = per_gpu.host_gpus(",".join(settings.visible_gpus))
        if len(gpus) > 1:
            return per_gpu.launch(gpus, argv, os.environ, settings.name, CUDA_VISIBLE_DEVICES)
        logging.getLogger(__name__).info("--per-gpu: %d GPU(s) visible, so one worker", len(gpus))
    if settings.role == "render" and settings.preload_engine == "facefusion":
        try:
            facefusion_startup.check_accelerator(os.environ)
        except EngineUnavailable as error:
            # Loud, at start: a broken CUDA must not turn into a worker rendering on the CPU.
            logging.getLogger(__name__).critical("worker not started: %s", error.reason)
            print(f"{parser.prog}: cannot start: {error.reason}", file=sys.stderr)
            return 3
    stop = StopSignal()
    stop.install()
    worker = build_worker(settings, stop)
    worker.run(max_tasks=settings.max_tasks)
    # A warm stop is a clean exit (ECS, deployments); a second signal aborted work in hand.
    return 1 if worker.cold_stopped else 0


if __name__ == "__main__":
    sys.exit(main())
