"""The engine host's pure parts: when to recycle the engine process, how long a segment may take."""

from __future__ import annotations

from fusionfleet.jobs.timeouts import TimeoutPolicy
from gpu_worker.hosting.engine_host import (
    HostPolicy,
    _own_rss_mb,
    default_gpu_limit_mb,
    gpu_memory_of,
    process_tree,
    recycle_reason,
    rss_mb,
)

POLICY = HostPolicy(max_tasks=10, max_rss_mb=1000, max_gpu_mb=2000)


def test_a_healthy_engine_process_is_kept() -> None:
    assert recycle_reason(9, 999.0, 1999.0, POLICY) is None
    assert recycle_reason(9, 999.0, None, POLICY) is None


def test_the_engine_process_is_recycled_after_its_task_limit() -> None:
    assert recycle_reason(10, 10.0, None, POLICY) == "it rendered 10 segments (limit 10)"


def test_the_engine_process_is_recycled_when_its_memory_grows() -> None:
    assert recycle_reason(1, 1000.0, None, POLICY) is None
    assert recycle_reason(1, 1500.0, None, POLICY) == "its resident memory is 1500 MB (limit 1000 MB)"


def test_gpu_memory_counts_only_where_it_is_measured_and_bounded() -> None:
    assert recycle_reason(1, 10.0, 2500.0, POLICY) == "it holds 2500 MB of GPU memory (limit 2000 MB)"
    assert recycle_reason(1, 10.0, 2500.0, HostPolicy(max_tasks=10, max_rss_mb=1000)) is None


def test_the_task_limit_is_named_first_when_several_apply() -> None:
    assert recycle_reason(10, 5000.0, 5000.0, POLICY) == "it rendered 10 segments (limit 10)"


def test_a_segment_may_take_longer_the_more_frames_it_has() -> None:
    policy = HostPolicy(base_timeout_s=120, seconds_per_frame=2)
    assert policy.timeout_s(0) == 120 and policy.timeout_s(50) == 220


def test_gpu_memory_is_counted_over_the_engines_process_tree() -> None:
    # GIVEN nvidia-smi's per-process lines, the engine (10) and its FaceFusion child (11) among them
    apps = "10, 300\n11, 5000\n99, 7000\nbad line\n12, n/a\n"
    # WHEN the engine's tree is counted THEN its child's memory counts, another process's does not
    assert gpu_memory_of(apps, [10, 11]) == 5300.0
    assert gpu_memory_of(apps, [42]) == 0.0


def test_the_process_tree_and_its_memory_include_children() -> None:
    # GIVEN this process with a child that holds 200 MB
    import os
    import subprocess
    import sys
    import time

    child = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; b = bytearray(200 * 2**20); print(flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE,
    )
    try:
        assert child.stdout is not None
        child.stdout.readline()
        time.sleep(0.1)
        # WHEN the tree is walked THEN the child is in it, and its memory in the tree's
        assert child.pid in process_tree(os.getpid())
        assert rss_mb(os.getpid()) >= _own_rss_mb(os.getpid()) + 190
    finally:
        child.kill()
        child.wait()


def test_a_jobs_content_analysis_is_given_what_the_whole_target_needs_not_a_segments_limit() -> None:
    # GIVEN the worker's default limits and a three-hour target at 60 fps (the longest the stack takes)
    policy, frames = HostPolicy(), 3 * 3600 * 60
    # THEN its analysis may run as long as the state machine's clocks for the step were derived for
    assert policy.analysis_timeout_s(frames) == TimeoutPolicy().analysis_attempt_s(frames)
    # AND that is many times what any segment gets: no segment carries the analysis any more
    assert policy.analysis_timeout_s(frames) > 10 * policy.timeout_s(600)


def test_without_a_configured_bound_an_engine_may_hold_most_of_its_gpus_memory() -> None:
    # GIVEN a 24 GiB GPU and no FUSIONFLEET_ENGINE_MAX_GPU_MB WHEN the bound is chosen
    # THEN it is 85 % of the card: a warm FaceFusion holding more is recycled; a CPU host has none
    assert default_gpu_limit_mb(24_576.0) == 20_889
    assert recycle_reason(1, 10.0, 21_000.0, HostPolicy(max_gpu_mb=default_gpu_limit_mb(24_576.0))) is not None
    assert default_gpu_limit_mb(None) is None
