"""The warm FaceFusion process: FaceFusion 3.8.1 imported once, segments rendered in memory.

Started once per engine by `warm.WarmFaceFusionEngine` with FaceFusion's interpreter, in FaceFusion's
folder, as a script (`python warm_server.py`): it imports only the standard library, numpy and
FaceFusion, never the project, so it runs in FaceFusion's own environment. It reads requests on
standard input and answers on a private copy of standard output; FaceFusion's console output goes
to standard error.

Per segment it applies the job's argv the way `facefusion.py headless-run` does (FaceFusion's own
parser, validation and `apply_args`, so defaults and refusals stay FaceFusion's), runs the
processors' `pre_check` once per distinct option set and their `pre_process` per segment, then
renders each frame through `workflows.core.process_temp_frame` on a thread pool of FaceFusion's
execution thread count. Inference sessions stay in FaceFusion's pool between segments; the video
memory strategy is `tolerant` so its post-processing keeps them, and the first segment of a new option
set releases the processors' pools it did not use (the engine host bounds memory by recycling this process with its
engine). Frames sent with `"process": false` are context only (lead-in and lead-out: the tracker's
neighbours) and answered `skipped`. As FaceFusion does, a frame is scaled to the output size before its
processors see it (`output_video_scale`, vision.scale_resolution), its neighbours are not.

The wire format is `wire.py`'s.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Any

import numpy as np

try:  # in the project's interpreter (the engine's side); FaceFusion's imports them from beside this file
    from gpu_worker.engines.facefusion.console_tail import ConsoleTail, last_log_line
    from gpu_worker.engines.facefusion.cpu_sessions import sharing_cores
    from gpu_worker.engines.facefusion.frame_ring import FrameRing
    from gpu_worker.engines.facefusion.warm_segment import finish, temp_frame
    from gpu_worker.engines.facefusion.wire import (
        HEADER,
        frame_bytes,
        frame_from,
        frame_shape,
        output_frame,
        read_message,
        write_message,
    )
except ImportError:  # pragma: no cover - FaceFusion's interpreter
    from console_tail import ConsoleTail, last_log_line  # type: ignore[no-redef,import-not-found]
    from cpu_sessions import sharing_cores  # type: ignore[no-redef,import-not-found]
    from frame_ring import FrameRing  # type: ignore[no-redef,import-not-found]
    from warm_segment import finish, temp_frame  # type: ignore[no-redef,import-not-found]
    from wire import (  # type: ignore[no-redef,import-not-found]
        HEADER,
        frame_bytes,
        frame_from,
        frame_shape,
        output_frame,
        read_message,
        write_message,
    )

__all__ = ["HEADER", "frame_bytes", "frame_from", "read_message", "write_message"]  # the wire, for the engine's side

PARSED_LIMIT = 64  # distinct argvs whose parse is kept (one per job and option set)
# FaceFusion's face store is keyed by a frame's pixels alone, whatever the options that found the faces;
# the options that decide which faces are found (face_creator.get_many_faces reads no others: the selector
# and the reference filter the stored faces afterwards, face_selector.select_faces). Chained passes that
# differ only in whom they pick (reference_face_position) so keep their sources' and references' faces.
FACE_OPTION_PREFIXES = ("face_detector_", "face_landmarker_")
# Inference contexts (inference_manager.get_inference_context) begin with the module's name.
PROCESSOR_MODULES = "facefusion.processors.modules."


class Refused(Exception):
    """FaceFusion would not run this segment; the message is its reason."""

    def __init__(self, reason: str, job_inputs: bool = False) -> None:
        super().__init__(reason)
        # True where the job's own inputs are refused (a processor's pre-processing: no source face),
        # which every worker would refuse alike; False where this worker may be at fault (models, providers).
        self.job_inputs = job_inputs


def sibling(name: str) -> Any:
    """A module beside this file, by its path: this one runs as a script under FaceFusion's interpreter."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(__file__), f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # where a dataclass in it looks its module up
    spec.loader.exec_module(module)
    return module


class FaceFusion:
    """FaceFusion's modules, imported once, and what this process has done with them."""

    def __init__(self) -> None:
        from facefusion import inference_manager, state_manager

        # On the CPU, sessions that leave the cores to the execution threads' frames (cpu_sessions.py).
        def threads() -> int:
            return int(state_manager.get_item("execution_thread_count") or 1)

        inference_manager.InferenceSession = sharing_cores(inference_manager.InferenceSession, threads)
        self.session_loads = 0
        self.loaded: list[str] = []  # model files, in the order their sessions were created
        self.checked: set[tuple[str, ...]] = set()
        self.parsed: dict[tuple[str, ...], dict[str, Any]] = {}
        self.face_options: list[tuple[str, str]] | None = None  # those the face store was filled under
        self.job: str | None = None  # the job whose faces the face store holds
        self.used_pools: set[int] = set()  # ids of the inference pools asked for since the segment began
        create = inference_manager.create_inference_session

        def counted(model_path: str, *args: Any, **kwargs: Any) -> Any:
            self.session_loads += 1
            self.loaded.append(os.path.basename(model_path))
            return create(model_path, *args, **kwargs)

        # Counted, not changed: proof that a warm segment loads no model.
        inference_manager.create_inference_session = counted
        get_pool = inference_manager.get_inference_pool
        creating = threading.RLock()

        def serialised(*args: Any, **kwargs: Any) -> Any:
            # FaceFusion creates a pool on first use without a lock: threads that first need a model
            # together (any frame, not only the first: a face can appear mid-segment) each create
            # its sessions. A pool that exists is a dictionary look-up, so the lock costs nothing.
            with creating:
                pool = get_pool(*args, **kwargs)
                self.used_pools.add(id(pool))
                return pool

        inference_manager.get_inference_pool = serialised
        ears = sibling("warm_sound")
        self.sound = ears.Sound()  # what the lip syncer hears with each frame
        self.voice_spectrogram = ears.voice_spectrogram

    def configure(self, argv: list[str]) -> None:
        """Apply `argv` to FaceFusion's state as its CLI does; Refused with its own message."""
        from facefusion import logger, state_manager
        from facefusion.args import apply_args
        from facefusion.program import create_program
        from facefusion.program_helper import validate_args

        key = tuple(argv)
        args = self.parsed.get(key)
        if args is None:
            # Processors register their flags from the command line (parse_known_args reads sys.argv).
            sys.argv = ["facefusion.py", *argv]
            program = create_program()
            if not validate_args(program):
                raise Refused("FaceFusion rejected its own argument defaults (no usable provider or encoder)")
            errors = io.StringIO()
            try:
                with contextlib.redirect_stderr(errors):
                    args = vars(program.parse_args(argv))
            except SystemExit:
                lines = [line for line in errors.getvalue().splitlines() if line.strip()]
                raise Refused(lines[-1] if lines else "FaceFusion refused its arguments") from None
            if len(self.parsed) >= PARSED_LIMIT:
                self.parsed.clear()
            self.parsed[key] = args
        # Every segment starts from FaceFusion's full state for its argv: nothing leaks between jobs.
        apply_args(args, state_manager.init_item)
        logger.init(state_manager.get_item("log_level"))
        self.clear_faces_on_change(args)

    def clear_faces_on_change(self, args: dict[str, Any]) -> None:
        """Forget the faces found under other detection, landmark or selection options."""
        from facefusion import face_store

        options = face_options(args)
        if options != self.face_options:
            face_store.clear_faces()
            self.face_options = options

    def clear_faces_for_job(self, job: str | None) -> None:
        """Each job starts with an empty face store, as a FaceFusion run does."""
        from facefusion import face_store

        if job != self.job:
            face_store.clear_faces()
            self.job = job

    def release_unused_pools(self) -> list[str]:
        """Drop the processors' inference pools this option set's first segment did not use.

        Only processors' (an enhancer, an age modifier: what one option set has and the next may not):
        the face-analysis models serve every option set, and a segment whose faces the face store
        already held asks for none of them. Returns the released pools' model names.
        """
        from facefusion import inference_manager

        released: list[str] = []
        for pools in inference_manager.INFERENCE_POOL_SET.values():
            for context, pool in list(pools.items()):
                if context.startswith(PROCESSOR_MODULES) and id(pool) not in self.used_pools:
                    released.extend(sorted(pool))
                    del pools[context]
        return released

    def check(self, key: tuple[str, ...]) -> None:
        """FaceFusion's pre-checks (model files and their hashes), once per distinct option set."""
        from facefusion import core

        if key in self.checked:
            return
        with checking():
            if not core.common_pre_check():
                raise Refused("FaceFusion's content analyser check failed (its source was changed)")
            if not core.processors_pre_check():
                raise Refused("a processor's pre-check failed: its models are missing or fail their hash check")
        self.checked.add(key)

    def pre_process(self) -> list[Any]:
        from facefusion import state_manager
        from facefusion.processors.core import get_processors_modules

        modules = get_processors_modules(state_manager.get_item("processors"))
        for module in modules:
            # 'output', as headless-run's core.conditional_process asks: 'stream' (the webcam) is a mode
            # the expression restorer refuses. The segment's paths satisfy its checks (an image target,
            # an output of the same extension in an existing folder).
            if not module.pre_process("output"):
                reason = last_log_line() or f"{module.__name__}: its pre-processing refused the job"
                raise Refused(reason, job_inputs=True)
        return list(modules)


def face_options(args: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted((name, repr(value)) for name, value in args.items() if name.startswith(FACE_OPTION_PREFIXES))


@contextlib.contextmanager
def checking() -> Iterator[None]:
    """FaceFusion's pre-checks, leaving its process state as they found it.

    A failed hash check (download.conditional_download_hashes) leaves the state at 'checking', and
    inference_manager.get_inference_pool waits while it is: harmless in a one-shot run, which exits,
    but in this long-lived process every later segment would hang on its first frame.
    """
    from facefusion import process_manager

    try:
        yield
    finally:
        if process_manager.is_checking():
            process_manager.end()


def render(
    engine: FaceFusion, header: dict[str, Any], receive: Callable[[], tuple[dict[str, Any], bytes]], send: Any
) -> None:
    """One segment: configure, check, then frames in → frames out, in order."""
    from facefusion import content_analyser, state_manager
    from facefusion.vision import create_empty_vision_frame, read_static_image, read_static_video_frame
    from facefusion.workflows.core import process_temp_frame

    # The engine writes each segment's images to the same paths, and FaceFusion caches images by path.
    read_static_image.cache_clear()
    read_static_video_frame.cache_clear()
    loads_before = engine.session_loads
    clock = time.perf_counter()
    phases: dict[str, float] = {}

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        phases[name] = round(now - clock, 4)
        clock = now

    engine.configure(header["argv"])
    engine.clear_faces_for_job(header.get("job"))
    engine.sound.segment(
        header.get("audio"), state_manager.get_item("source_paths") or [], state_manager.get_item("processors")
    )
    engine.used_pools.clear()
    # The target path is the reference frame, as an image: for an image FaceFusion reads the
    # reference face from the image itself (workflows.core.conditional_get_reference_vision_frame);
    # the frames themselves come from memory.
    state_manager.set_item("workflow_mode", "image-to-image")
    lap("configure_s")
    new_options = tuple(header["check_key"]) not in engine.checked
    engine.check(tuple(header["check_key"]))
    lap("pre_check_s")
    modules = engine.pre_process()
    lap("pre_process_s")
    # 0 is an amount too: the tracker then sees the frame alone, as in FaceFusion.
    amount = int(state_manager.get_item("target_frame_amount"))
    threads = int(state_manager.get_item("execution_thread_count"))
    # Frames read before the first answer: a shared ring needs more slots than this (frame_ring.ring_slots).
    send({"op": "ready", "in_flight": amount + 2 * threads + 1})

    every = max(1, int(header["fps"]))
    analyse = bool(header.get("analyse", True))
    scale = float(header.get("output_video_scale", 1.0))
    alpha = bool(header.get("alpha"))
    rings: dict[str, FrameRing] = {}
    window: dict[int, np.ndarray] = {}
    processed: dict[int, bool] = {}
    numbers: dict[int, int] = {}  # each frame's number in the whole target (what the lip syncer hears by)
    pending: deque[Future[np.ndarray] | None] = deque()  # None: a context frame, answered `skipped`
    sampled = flagged = produced = 0

    def neighbours(position: int) -> list[np.ndarray]:
        return [window.get(p, create_empty_vision_frame()) for p in range(position - amount, position + amount + 1)]

    def submit(position: int) -> None:
        number = numbers.pop(position)
        if not processed.pop(position):
            pending.append(None)
            return
        frames = neighbours(position)
        temp = temp_frame(frames[amount], scale)
        pending.append(executor.submit(process_temp_frame, frames, temp, number))

    def flush(limit: int) -> None:
        nonlocal produced
        while len(pending) > limit:
            future = pending.popleft()
            if future is None:
                send({"op": "skipped"})
                produced += 1
                continue
            image = output_frame(future.result(), alpha)  # BGRA where the job keeps background_remover's matte
            shape = frame_shape(image)
            out = rings.get("output")
            if out is not None and out.fits(image.shape):
                # The engine took the output this slot held before (it sent a frame only after taking it).
                slot = out.slot_of(produced)
                out.put(slot, image)
                send({"op": "frame", "shape": shape, "slot": slot})
            else:  # no ring, or a larger frame (an enhancer's): in the pipe
                send({"op": "frame", "shape": shape}, frame_bytes(image))
            produced += 1

    try:
        with ThreadPoolExecutor(max_workers=threads) as executor:
            position = 0
            while True:
                message, payload = receive()
                if message["op"] == "end":
                    break
                if message["op"] == "ring":
                    # The engine's shared rings for this segment: frames arrive and leave by slot number.
                    rings.update({side: FrameRing.attach(message[side]) for side in ("input", "output")})
                    continue
                image = frame_from(message, payload, rings.get("input"))
                window[position] = image
                processed[position] = bool(message.get("process", True))
                numbers[position] = int(message.get("number", position))
                # As content_analyser.analyse_video samples a target: one frame a second. Not where the
                # job's verdict was made once over the whole video (the engine says so): no second decision.
                if analyse and position % every == 0:
                    sampled += 1
                    flagged += bool(content_analyser.analyse_frame(image))
                if position - amount >= 0:
                    submit(position - amount)
                    window.pop(position - 2 * amount - 1, None)
                flush(2 * threads)
                position += 1
            for last in range(max(0, position - amount), position):
                submit(last)
            flush(0)
    finally:
        for ring in rings.values():
            ring.close()
    lap("frames_s")
    for module in modules:
        module.post_process()
    reply = finish(engine, loads_before, new_options, phases, frames=produced, sampled=sampled, flagged=flagged)
    lap("post_process_s")  # into `phases`, which the reply holds
    send(reply)


def analyse(
    engine: FaceFusion, header: dict[str, Any], receive: Callable[[], tuple[dict[str, Any], bytes]], send: Any
) -> None:
    """The content analyser's flag for each frame sent (the job's whole-video verdict is the engine's)."""
    from facefusion import content_analyser, core

    engine.configure(header["argv"])
    with checking():
        if not core.common_pre_check() or not content_analyser.pre_check():
            raise Refused(last_log_line() or "FaceFusion's content analyser is missing or fails its checks")
    send({"op": "ready"})
    flags: list[bool] = []
    while True:
        message, payload = receive()
        if message["op"] == "end":
            break
        flags.append(bool(content_analyser.analyse_frame(frame_from(message, payload))))
    send({"op": "analysed", "flags": flags})


def voice(
    engine: FaceFusion, header: dict[str, Any], receive: Callable[[], tuple[dict[str, Any], bytes]], send: Any
) -> None:
    """The job's voice, extracted once (its analysis step) with its options: the spectrogram FaceFusion's
    read_voice cuts its frames from, written to `out` for every segment to read instead of extracting it."""
    from facefusion import voice_extractor

    engine.configure(header["argv"])
    with checking():
        if not voice_extractor.pre_check():
            raise Refused(last_log_line() or "FaceFusion's voice extractor is missing or fails its checks")
    started = time.perf_counter()
    try:
        spectrogram = engine.voice_spectrogram(header["audio"], float(header["fps"]))
    finally:
        # Segments read the stored voice and never ask for the extractor again: its session goes.
        voice_extractor.clear_inference_pool()
    if spectrogram is None:
        raise Refused(f"FaceFusion read no audio from {os.path.basename(header['audio'])}", job_inputs=True)
    np.save(header["out"], spectrogram, allow_pickle=False)
    send({"op": "voiced", "shape": list(spectrogram.shape), "seconds": round(time.perf_counter() - started, 4)})


def chain(
    engine: FaceFusion, header: dict[str, Any], receive: Callable[[], tuple[dict[str, Any], bytes]], send: Any
) -> None:
    """One segment through chained passes (`warm_chain.py`): a remix chain, or one pass per person."""
    chained = sys.modules.get("warm_chain") or sibling("warm_chain")
    send(chained.render_chain(engine, header, receive, send, temp_frame, frame_from, finish))


def drain(receive: Callable[[], tuple[dict[str, Any], bytes]]) -> None:
    """Skip the rest of a segment the client is still sending."""
    while receive()[0]["op"] != "end":
        pass


def serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    def receive() -> tuple[dict[str, Any], bytes]:
        return read_message(requests)

    def send(header: dict[str, Any], payload: bytes = b"") -> None:
        write_message(replies, header, payload)

    engine = FaceFusion()
    send({"op": "started", "pid": os.getpid()})
    for message, _ in iter_requests(receive):
        if message["op"] == "stop":
            return
        started = False

        def send_tracking(header: dict[str, Any], payload: bytes = b"") -> None:
            nonlocal started
            started = started or header["op"] == "ready"
            send(header, payload)

        try:
            step = {"analyse": analyse, "voice": voice, "chain": chain}.get(message["op"], render)
            step(engine, message, receive, send_tracking)
        except Refused as refusal:
            send({"op": "refused", "reason": str(refusal), "job_inputs": refusal.job_inputs})
        except Exception as error:  # every failure becomes an answer; the process stays warm
            where = traceback.format_exception_only(error)[-1].strip()
            send({"op": "error", "reason": f"{where} (last output: {last_log_line() or 'none'})"})
            if started:
                drain(receive)


def iter_requests(receive: Callable[[], tuple[dict[str, Any], bytes]]) -> Iterator[tuple[dict[str, Any], bytes]]:
    while True:
        try:
            yield receive()
        except EOFError:
            return


def main() -> None:
    # Replies on a private copy of stdout; everything else that prints goes to stderr.
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.path.insert(0, os.getcwd())  # FaceFusion's folder: `facefusion` is imported from it
    # FaceFusion's logger.init (basicConfig) then logs through it, so its last words are at hand.
    sys.stderr = ConsoleTail()
    serve(sys.stdin.buffer, replies)


if __name__ == "__main__":
    main()
