"""Chained passes in the warm FaceFusion process: one segment's frames through several FaceFusion runs.

What FaceFusion's `job-run` does for a remix chain (step 2's target is step 1's output) and what a user
does by hand to swap two people (one run per person, each picking its person by a reference face): each
pass is one argv of its own (its options, sources and reference face), and its frames are the previous
pass's outputs. FaceFusion encodes the whole video between its steps and decodes it again; here each
frame goes from pass to pass in memory. The reference face of every pass is read from the picture the
engine wrote as that pass's target (the job's reference, decided once per job from the ORIGINAL target);
a pass marked `after_passes` (a job file's remix step, which job-run points at the step before's output)
reads it from that picture as the passes before change it: it goes through them first, as one picture
(with the tracker on, its neighbours are itself: job-run's step saw the video's).

FaceFusion's state is one per process (`state_manager`), not per thread, so the passes cannot run side
by side on one frame: frames are taken in waves (`wave_size`), each wave through pass 1 on the thread pool,
then pass 2, and so on (switching a pass is FaceFusion's `apply_args` from an argv parsed once). With
the face tracker on, a pass sees the previous pass's outputs as a frame's neighbours, as step 2 of a job
sees step 1's video; a frame waits in a pass until its neighbours have left the one before.

Loaded beside `warm_server.py` (which hands it the engine, the pipe and `temp_frame`) under FaceFusion's
interpreter: standard library, numpy and FaceFusion only.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

try:  # in the project's interpreter; FaceFusion's imports it from beside this file
    from gpu_worker.engines.facefusion.wire import frame_shape, output_frame
except ImportError:  # pragma: no cover - FaceFusion's interpreter
    from wire import frame_shape, output_frame  # type: ignore[no-redef,import-not-found]


# Waves of 8 frames a thread rather than 2: on the chain speed benchmark (2 threads, 2 passes) the threads were
# busy 97 % of the passes' time rather than 89 %, 18-21 s rather than 24-26 s, the frames the same.
WAVE_PER_THREAD = 8
WAVE_BYTES = 512 * 2**20  # a wave's frames in memory at most (4K BGR: 21 frames)


@dataclass
class Pass:
    """One FaceFusion run of the chain, as the engine sent it, and what it has done in this segment."""

    argv: list[str]
    check_key: tuple[str, ...]
    scale: float
    after_passes: bool = False  # its reference picture goes through the passes before it first
    modules: list[Any] = field(default_factory=list)
    amount: int = 0  # its tracker's frames each side (target_frame_amount)
    inputs: dict[int, np.ndarray] = field(default_factory=dict)  # its frames by position: the pass before's outputs
    done: int = 0  # positions it has answered, from 0


def wave_size(threads: int, frame_bytes: int) -> int:
    """Frames a wave takes through each pass: WAVE_PER_THREAD a thread, for threads wait at each switch between
    passes (while a pass's last frames end), no more than WAVE_BYTES of them, at least 2 a thread. Pure."""
    return max(2 * threads, min(WAVE_PER_THREAD * threads, WAVE_BYTES // max(1, frame_bytes)), 1)


def ready_until(amount: int, known: int, ended: bool) -> int:
    """The positions a pass may take (below this): its input frames known to `known`, and each frame's
    neighbours up to `amount` after it known too, or no more to come. Pure."""
    return known if ended else max(0, known - amount)


def render_chain(
    engine: Any,
    header: dict[str, Any],
    receive: Callable[[], tuple[dict[str, Any], bytes]],
    send: Callable[..., None],
    temp_frame: Callable[[np.ndarray, float], np.ndarray],
    frame_from: Callable[[dict[str, Any], bytes], np.ndarray],
    finish: Callable[..., dict[str, Any]],
) -> dict[str, Any]:
    """One segment through every pass: configured and checked pass by pass, then frames in → frames out;
    the reply that ends it (`finish`: warm_server's, as a single run's)."""
    from facefusion import content_analyser, state_manager
    from facefusion.vision import create_empty_vision_frame, read_static_image, read_static_video_frame, write_image
    from facefusion.workflows.core import process_temp_frame

    read_static_image.cache_clear()
    read_static_video_frame.cache_clear()
    loads_before = engine.session_loads
    passes = [
        Pass(p["argv"], tuple(p["check_key"]), float(p.get("output_video_scale", 1.0)), bool(p.get("after_passes")))
        for p in header["passes"]
    ]
    engine.used_pools.clear()
    engine.clear_faces_for_job(header.get("job"))
    current: list[int] = [-1]

    def use(index: int) -> None:
        """FaceFusion's state for pass `index` (its argv applied as its CLI applies it)."""
        if current[0] == index:
            return
        engine.configure(passes[index].argv)
        state_manager.set_item("workflow_mode", "image-to-image")  # the reference face from its target picture
        engine.sound.segment(
            header.get("audio"), state_manager.get_item("source_paths") or [], state_manager.get_item("processors")
        )
        current[0] = index

    def reference_through(index: int) -> None:
        """Pass `index`'s reference picture as the passes before leave it, written back where its argv reads it."""
        path = state_manager.get_item("target_path")
        picture = read_static_image(path)
        for before, earlier in enumerate(passes[:index]):
            use(before)
            frames = [picture] * (2 * earlier.amount + 1)
            picture = np.ascontiguousarray(process_temp_frame(frames, temp_frame(picture, earlier.scale), 0)[:, :, :3])
        write_image(path, picture)
        read_static_image.cache_clear()
        use(index)

    new_options = False
    for index, chained in enumerate(passes):
        use(index)
        if chained.after_passes and index > 0:
            reference_through(index)
        new_options = new_options or chained.check_key not in engine.checked
        engine.check(chained.check_key)
        chained.modules = engine.pre_process()
        chained.amount = int(state_manager.get_item("target_frame_amount"))
    threads = int(state_manager.get_item("execution_thread_count"))
    send({"op": "ready", "in_flight": 0})  # the frames in the pipe: a wave holds more than a ring's slots

    last = len(passes) - 1
    # A pass before the last also answers the context frames where a later pass's tracker looks at them.
    context_needed = [any(later.amount > 0 for later in passes[index + 1 :]) for index in range(len(passes))]
    wave = 0  # from the first frame's size
    every = max(1, int(header["fps"]))
    analyse = bool(header.get("analyse", True))
    emit: dict[int, bool] = {}
    numbers: dict[int, int] = {}
    count = sampled = flagged = produced = 0
    ended = False

    def neighbours(chained: Pass, position: int) -> list[np.ndarray]:
        return [
            chained.inputs.get(p, create_empty_vision_frame())
            for p in range(position - chained.amount, position + chained.amount + 1)
        ]

    def step(executor: ThreadPoolExecutor) -> None:
        """Each pass takes what it may, in pass order; the last pass's answers go back in order."""
        nonlocal produced
        known, through = count, ended
        for index, chained in enumerate(passes):
            until = ready_until(chained.amount, known, through)
            positions = range(chained.done, until)
            if positions:
                use(index)
                work = {}
                for position in positions:
                    if emit[position] or (index < last and context_needed[index]):
                        frames = neighbours(chained, position)
                        temp = temp_frame(frames[chained.amount], chained.scale)
                        work[position] = executor.submit(process_temp_frame, frames, temp, numbers[position])
                for position in positions:
                    future = work.get(position)
                    if index < last:
                        image = chained.inputs[position] if future is None else future.result()[:, :, :3]
                        passes[index + 1].inputs[position] = np.ascontiguousarray(image, dtype=np.uint8)
                    elif future is None:
                        send({"op": "skipped"})
                        produced += 1
                    else:
                        # the last pass's matte: FaceFusion run by hand reads an earlier run's output without alpha
                        image = output_frame(future.result(), bool(header.get("alpha")))
                        send({"op": "frame", "shape": frame_shape(image)}, image.tobytes())
                        produced += 1
                chained.done = until
                for old in [p for p in chained.inputs if p < until - chained.amount - 1]:
                    del chained.inputs[old]
            known, through = chained.done, through and chained.done == known

    with ThreadPoolExecutor(max_workers=threads) as executor:
        while True:
            message, payload = receive()
            if message["op"] == "end":
                break
            image = frame_from(message, payload)
            passes[0].inputs[count] = image
            emit[count] = bool(message.get("process", True))
            numbers[count] = int(message.get("number", count))
            # The job's content analysis is over the original frames, as FaceFusion's first step's is.
            if analyse and count % every == 0:
                sampled += 1
                flagged += bool(content_analyser.analyse_frame(image))
            count += 1
            wave = wave or wave_size(threads, image.nbytes)
            if count - passes[last].done >= wave + sum(chained.amount for chained in passes):
                step(executor)
        ended = True
        while passes[last].done < count:
            step(executor)
    for index, chained in enumerate(passes):
        use(index)
        for module in chained.modules:
            module.post_process()
    return finish(engine, loads_before, new_options, {}, frames=produced, sampled=sampled, flagged=flagged,
                  passes=len(passes))  # fmt: skip
