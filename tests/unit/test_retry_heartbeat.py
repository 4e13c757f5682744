from __future__ import annotations

from fusionfleet.errors import InputRejected, MediaError
from gpu_worker.delivery.keeper import KeepPolicy
from gpu_worker.delivery.retry import RetryPolicy, describe, retryable
from gpu_worker.engines.base import EngineError, EngineUnavailable


def test_heartbeat_extends_before_the_visibility_runs_out() -> None:
    policy = KeepPolicy(visibility_s=120)
    assert policy.interval_s() == 40
    assert KeepPolicy(visibility_s=1).interval_s() == 1.0


def test_retry_policy_is_data() -> None:
    policy = RetryPolicy(max_attempts=3, backoff_s=(2, 10))
    assert [policy.delay_s(n) for n in (1, 2, 3)] == [2, 10, 10]
    assert not policy.is_last(2) and policy.is_last(3)


def test_bad_input_and_missing_engines_are_not_retried() -> None:
    assert not retryable(InputRejected("no face"))
    assert not retryable(EngineUnavailable("no facefusion"))
    assert retryable(MediaError("ffmpeg crashed"))
    assert retryable(EngineError("out of memory"))
    assert retryable(RuntimeError("boom"))


def test_errors_are_described_by_name_and_reason() -> None:
    assert describe(MediaError("ffmpeg exited with 1")) == ("MediaError", "ffmpeg exited with 1")
    assert describe(ValueError()) == ("ValueError", "ValueError()")
