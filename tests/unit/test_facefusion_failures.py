"""FaceFusion's last words reach a failed segment's reason: bounded, without progress bars or secrets."""

from __future__ import annotations

from gpu_worker.engines.facefusion.failures import (
    MASK,
    MAX_REASON_CHARS,
    MAX_REASON_LINES,
    failure_reason,
    input_refusal,
    last_words,
    meaningful_lines,
    redact,
    with_output,
)


def test_the_last_meaningful_lines_are_kept_and_bars_dropped() -> None:
    # GIVEN 30 log lines with progress bars redrawn among them
    log = "".join(f"[FACEFUSION.CORE] line {n}\nprocessing:  {n}%|==  | {n}/30 [00:01<00:02]\r" for n in range(30))
    # WHEN the reason's lines are picked THEN they are the last 20 log lines, in order
    lines = meaningful_lines(log)
    assert len(lines) == MAX_REASON_LINES
    assert lines[0] == "[FACEFUSION.CORE] line 10" and lines[-1] == "[FACEFUSION.CORE] line 29"


def test_the_reason_is_bounded() -> None:
    words = last_words("\n".join("x" * 500 + str(n) for n in range(20)))
    assert len(words) <= MAX_REASON_CHARS + 1 and words.startswith("…") and words.endswith("19")


def test_secrets_never_reach_the_reason() -> None:
    log = "\n".join(
        [
            "[FACEFUSION.DOWNLOAD] GET https://b.s3.amazonaws.com/k.onnx?X-Amz-Credential=AKIAABCDEFGHIJKLMNOP%2F"
            "&X-Amz-Signature=0123abcd&X-Amz-Security-Token=FwoGZXIvYXdz",
            "env: AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG AWS_SESSION_TOKEN='IQoJb3JpZ2luX2Vj'",
            "Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.payload.sig",
            "key id ASIAQWERTYUIOPASDFGH, password: hunter2",
        ]
    )
    reason = failure_reason(1, log)
    for secret in ("AKIAABCDEFGHIJKLMNOP", "0123abcd", "FwoGZXIvYXdz", "wJalrXUtnFEMI", "IQoJb3JpZ2luX2Vj",
                   "eyJhbGciOiJSUzI1NiJ9", "ASIAQWERTYUIOPASDFGH", "hunter2"):  # fmt: skip
        assert secret not in reason, secret
    # AND the lines still say what was there
    assert "AWS_SECRET_ACCESS_KEY=" + MASK in reason and "X-Amz-Signature=" + MASK in reason
    assert redact("[FACEFUSION.CORE] processing step 1 of 1") == "[FACEFUSION.CORE] processing step 1 of 1"


def test_a_reason_gets_what_facefusion_said_besides_it() -> None:
    log = "[FACEFUSION.DOWNLOAD] validating gfpgan_1.4.onnx failed\n[FACEFUSION.CORE] no source face detected\n"
    reason = with_output("FaceFusion refused the job: [FACEFUSION.CORE] no source face detected", log)
    assert reason.endswith("FaceFusion's last output: [FACEFUSION.DOWNLOAD] validating gfpgan_1.4.onnx failed")
    assert with_output("FaceFusion refused the job: x", "") == "FaceFusion refused the job: x"


def test_a_source_without_a_face_is_a_refusal_of_the_jobs_inputs() -> None:
    # GIVEN headless-run's log when face_swapper's pre-processing found no face in the source images
    log = "[FACEFUSION.CORE] processing step 1 of 1\n[FACEFUSION.FACE_SWAPPER] no source face detected!\n"
    # THEN it is told as the job's inputs refused, in FaceFusion's words
    refusal = input_refusal(log)
    assert refusal is not None and "no source face detected" in refusal


def test_other_failures_are_not_refusals_of_the_jobs_inputs() -> None:
    # A worker's own trouble (models, providers, the farm's argv) may pass on another worker: retried.
    assert input_refusal("[FACEFUSION.FACE_SWAPPER] choose an image for the source!\n") is None
    assert input_refusal("Traceback (most recent call last):\nonnxruntime.capi.Fail: CUDA error\n") is None
    assert input_refusal("") is None
