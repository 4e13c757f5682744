"""The warm FaceFusion engine: one FaceFusion process per engine, frames through it in memory.

FaceFusion is imported once (`warm_server.py`, run by FaceFusion's interpreter in its folder), its
inference sessions stay loaded from segment to segment, and a segment's frames go to it and come
back over a pipe: no process per segment, no MOV written and decoded, no frame files. Per segment
only the job's source images and the reference frame are written as images, since FaceFusion reads
those by path. Everything else the per-segment engine promised holds: FaceFusion's own option
handling and refusals, exactly one frame back per frame, GPU pinning, a deadline per segment.
Frames the worker does not emit (lead-in, and the lead-out the face tracker looks ahead to) are
FaceFusion's context only: it sees them as neighbours and does not process them.
"""

from __future__ import annotations

import itertools
import logging
import shutil
import tempfile
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fusionfleet.errors import InputRejected
from fusionfleet.facefusion.options import OptionsError, validate_options
from gpu_worker.engines.base import EngineError, EngineJob, EngineUnavailable, Frame, Image
from gpu_worker.engines.facefusion import failures
from gpu_worker.engines.facefusion.argv import RunPaths, log_args, path_args
from gpu_worker.engines.facefusion.chain import ChainPass, chain_look_ahead, passes_of
from gpu_worker.engines.facefusion.execution import HostFacts, execution_args, memory_args
from gpu_worker.engines.facefusion.host_facts import gather_facts
from gpu_worker.engines.facefusion.job_options import check_options, option_args
from gpu_worker.engines.facefusion.media import write_sources
from gpu_worker.engines.facefusion.ring_flow import RingClosed, RingFlow
from gpu_worker.engines.facefusion.settings import EngineSettings, resolve_home, settings_from_env
from gpu_worker.engines.facefusion.warm_process import ServerGone, WarmProcess, deadline

logger = logging.getLogger(__name__)

# Sessions stay loaded: FaceFusion's post-processing releases them under strict and moderate.
WARM_MEMORY_STRATEGY = "tolerant"
VOICE_TIMEOUT_S = 3 * 3600.0  # the longest audio source (MediaLimits.max_duration_s) at real time


@dataclass
class SegmentStats:
    """What the last segment cost FaceFusion: inference sessions it created, frames analysed."""

    session_loads: int = 0
    session_loads_total: int = 0
    session_models: tuple[str, ...] = ()  # the model files of the sessions this segment created
    sampled: int = 0
    flagged: int = 0
    phases: dict[str, float] = field(default_factory=dict)  # seconds FaceFusion spent in each step
    pre_checked: bool = False  # its processors' pre-checks ran (new options for this process)
    released: tuple[str, ...] = ()  # models whose sessions a new option set released


def warm_execution_args(facts: HostFacts, settings: EngineSettings) -> list[str]:
    """The per-segment engine's execution flags, with the memory strategy that keeps models."""
    args = execution_args(facts, settings.worker_index, settings.gpu_device, settings.thread_count)
    flag = args.index("--video-memory-strategy")
    return [*args[:flag], *args[flag + 2 :], *memory_args(WARM_MEMORY_STRATEGY)]


def segment_argv(paths: RunPaths, options: Mapping[str, object], execution: list[str]) -> list[str]:
    """FaceFusion's argv for one segment: `headless-run` with the reference frame as its target."""
    return ["headless-run", *path_args(paths), *option_args(options), *execution, *log_args()]


def check_key(options: Mapping[str, object], execution: list[str]) -> list[str]:
    """What FaceFusion's pre-checks depend on: the options and execution flags, not the paths."""
    return [*option_args(options), *execution]


def with_reference(job: EngineJob, frames: Iterable[Frame]) -> tuple[Image | None, Iterator[Frame]]:
    """The picture FaceFusion takes the reference face from, and the frames, none held back.

    The job's own where it was decided once (a reference image, or the reference frame the slicer
    decoded from the whole video); else, when FaceFusion's mode takes no reference face, any picture
    serves: the segment's first frame. None when the segment has no frames.
    """
    iterator = iter(frames)
    first = next(iterator, None)
    if first is None:
        return None, iterator
    return (job.reference if job.reference is not None else first.image), itertools.chain([first], iterator)


def sound(job: EngineJob) -> dict[str, Any] | None:
    """How the lip syncer hears the job's audio source: at FaceFusion's processing rate, from the trim's start."""
    if job.audio is None:
        return None
    heard: dict[str, Any] = {"fps": job.fps, "start": 0}
    if job.timeline is not None:
        heard = {"fps": float(job.timeline.temp_fps), "start": job.timeline.start}
    if job.voice is not None:
        heard["voice"] = str(job.voice.absolute())  # the job's voice, extracted once (warm_sound.Sound)
    return heard


class WarmFaceFusionEngine:
    name = "facefusion"

    def __init__(
        self,
        settings: EngineSettings | None = None,
        facts: HostFacts | None = None,
        *,
        env: Mapping[str, str],
        rings: bool = True,
    ) -> None:
        self._env = dict(env)
        self._settings = settings
        self._facts = facts
        self._home: Path | None = None
        self._execution: list[str] = []
        self._process: WarmProcess | None = None
        self._scratch: Path | None = None
        self._unfinished = False  # a segment was started and its end not read
        self._decided = False  # this segment's content verdict is the job's, made once
        self._rings = rings  # frames in shared memory rather than the pipe, where there is room
        self.transport = ""  # how the last segment's frames crossed: "shared memory" or "pipe"
        self.stats = SegmentStats()

    def prepare(self) -> None:
        settings = self._settings or settings_from_env(self._env)
        home = resolve_home(settings)
        if shutil.which("curl", path=self._env.get("PATH")) is None:
            # No ffmpeg or ffprobe needed here, but FaceFusion runs curl when it lists its models.
            raise EngineUnavailable("FaceFusion cannot run on this worker: curl is not on PATH")
        facts = self._facts or gather_facts(settings, home, self._env)
        self._execution = warm_execution_args(facts, settings)
        self._settings, self._facts, self._home = settings, facts, home
        if settings.scratch is not None:
            settings.scratch.mkdir(parents=True, exist_ok=True)
        self._scratch = Path(tempfile.mkdtemp(prefix="facefusion-warm-", dir=settings.scratch))
        self._start()

    def _start(self) -> WarmProcess:
        assert self._settings is not None and self._home is not None and self._scratch is not None
        self._process = WarmProcess(self._settings.python, self._home, self._env, self._scratch / "facefusion.log")
        return self._process

    def validate(self, job: EngineJob) -> None:
        check_options(job)

    def lead_out_frames(self, job: EngineJob) -> int:
        return chain_look_ahead(job)

    def render(self, job: EngineJob, frames: Iterable[Frame]) -> Iterator[Image]:
        options = check_options(job)
        if self._home is None:
            self.prepare()
        settings = self._settings
        assert settings is not None
        if self._process is not None and self._unfinished:
            # The last segment ended between its header and its frames: FaceFusion is still in it.
            # A new process costs a model load; a confused one would cost wrong frames.
            logger.info("FaceFusion's warm process %s is inside an abandoned segment: replacing it", self._process.pid)
            self._process.stop(graceful=False)
            self._process = None
        process = self._process if self._process is not None and self._process.alive() else self._start()
        reference, rest = with_reference(job, frames)
        if reference is None:
            return
        assert self._scratch is not None
        # The same paths every segment, so a job's argv repeats and FaceFusion parses it once.
        folder = self._scratch / "inputs"
        try:
            request: dict[str, Any] = {"fps": job.fps, "analyse": not job.content_decided, "job": job.job_id,
                                       "audio": sound(job), "alpha": job.alpha}  # fmt: skip
            chained = passes_of(job, options)
            if chained:
                request |= {"op": "chain", "passes": self._write_passes(folder, job, chained)}
            else:
                paths = _segment_paths(folder, len(job.sources), job.audio)
                write_sources((*job.sources, reference), (*paths.sources, paths.target))
                request |= {"op": "segment", **self._run_fields(paths, options)}
            # A segment's length is unknown until its frames are read: the deadline is per frame.
            first = deadline(settings.timeout_base_s)
            mark = process.log_size()  # this segment's part of FaceFusion's output starts here
            self._unfinished = True
            process.send(request)
            header, _ = process.receive(first, "checking the job")
            self._unfinished = header["op"] == "ready"
            if header["op"] == "refused":
                reason = failures.with_output(f"FaceFusion refused the job: {header['reason']}", process.log_tail(mark))
                if header.get("job_inputs"):
                    # Every worker refuses these inputs alike: no retry, no blocklisting, the reason reaches the user.
                    raise InputRejected(reason)
                raise EngineError(reason)
            if header["op"] != "ready":
                raise EngineError(
                    failures.with_output(
                        f"FaceFusion failed before rendering: {header.get('reason', header)}", process.log_tail(mark)
                    )
                )
            self._decided = job.content_decided
            yield from self._stream(process, rest, settings, mark, int(header.get("in_flight", 0)))
        except ServerGone:
            self._process = None
            raise
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _run_fields(self, paths: RunPaths, options: Mapping[str, object]) -> dict[str, Any]:
        """One FaceFusion run's part of a request: its argv, what its pre-checks depend on, its output scale."""
        return {
            "argv": segment_argv(paths, options, self._execution),
            "check_key": check_key(options, self._execution),
            "output_video_scale": float(str(options.get("output_video_scale", 1.0))),
        }

    def _write_passes(self, folder: Path, job: EngineJob, chained: tuple[ChainPass, ...]) -> list[dict[str, Any]]:
        """Each pass's sources and reference picture written where its argv names them (a folder each)."""
        runs = []
        for index, each in enumerate(chained):
            try:  # a pass's own options, checked as the job's are (the slicer did; a message may come another way)
                options = validate_options(dict(each.options))
            except OptionsError as error:
                raise EngineError(
                    f"FaceFusion cannot take pass {index}'s options: " + "; ".join(error.problems)
                ) from error
            paths = _segment_paths(folder / f"pass-{index}", len(each.sources), job.audio)
            write_sources((*each.sources, each.reference), (*paths.sources, paths.target))
            runs.append({**self._run_fields(paths, options), "after_passes": each.after_passes})
        return runs

    def _stream(
        self, process: WarmProcess, frames: Iterator[Frame], settings: EngineSettings, mark: int, in_flight: int
    ) -> Iterator[Image]:
        sent: list[int] = []  # frames sent so far; the writer runs ahead of the replies
        context: deque[Image] = deque()  # the context frames sent, in order: FaceFusion answers them `skipped`
        shape: list[tuple[int, ...]] = []
        failure: list[BaseException] = []
        # Frames cross in shared memory where FaceFusion's process says how many it holds (ring_flow.py).
        rings = RingFlow(in_flight) if in_flight > 0 and self._rings else None

        def write() -> None:
            try:
                for frame in frames:
                    if not shape:
                        shape.append(frame.image.shape)
                        described = rings.open(frame.image.nbytes) if rings is not None else None
                        if described is not None:
                            process.send(described)
                            self.transport = "shared memory"
                    elif frame.image.shape != shape[0]:
                        raise EngineError(
                            f"frame {frame.index} is {frame.image.shape}; the segment's first was {shape[0]}"
                        )
                    height, width = frame.image.shape[:2]
                    if not frame.emit:
                        context.append(frame.image)
                    fields = {
                        "op": "frame",
                        "shape": [height, width],
                        "process": frame.emit,
                        "number": frame.index if frame.number is None else frame.number,
                    }
                    if rings is not None and rings.input is not None:
                        slot = rings.slot_for(len(sent))
                        rings.input.put(slot, frame.image)
                        process.send({**fields, "slot": slot})
                    else:
                        process.send(fields, np.ascontiguousarray(frame.image).data.cast("B"))
                    sent.append(frame.index)
            except RingClosed:
                pass  # the reader stopped: it reports why
            except BaseException as error:  # handed to the reader, which raises it
                failure.append(error)
            finally:
                try:
                    process.send({"op": "end"})
                except EngineError as error:
                    failure.append(error)

        self.transport = "pipe"
        writer = threading.Thread(target=write, name="facefusion-frames", daemon=True)
        writer.start()
        produced = 0
        try:
            while True:
                header, payload = process.receive(deadline(settings.timeout_base_s), f"frame {produced}")
                if header["op"] == "frame":
                    height, width, *channels = header["shape"]  # a channel count: BGRA (job.alpha)
                    dims = (height, width, channels[0] if channels else 3)
                    if "slot" in header and rings is not None and rings.output is not None:
                        image = rings.output.take(int(header["slot"]), dims)
                    else:
                        image = np.frombuffer(payload, dtype=np.uint8).reshape(dims)
                    if rings is not None:
                        rings.took()
                    yield image
                    produced += 1
                    continue
                if header["op"] == "skipped":
                    if rings is not None:
                        rings.took()
                    yield context.popleft()  # the worker drops it: any picture of the right count serves
                    produced += 1
                    continue
                # Either way FaceFusion has left the segment (after an error it skips what is still sent).
                self._unfinished = False
                if header["op"] == "done":
                    break
                raise EngineError(
                    failures.with_output(
                        f"FaceFusion failed after {produced} frames: {header.get('reason', header)}",
                        process.log_tail(mark),
                    )
                )
        finally:
            if self._unfinished:
                # Abandoned by the consumer, or FaceFusion is gone: nothing will read its replies,
                # so it is stopped now (which also ends the writer) rather than left blocked.
                process.stop(graceful=False)
                self._process = None
            if rings is not None:
                rings.stop()
            writer.join(timeout=settings.timeout_base_s)
            if rings is not None and not writer.is_alive():
                rings.close()  # (a writer still alive may still write into them: left to the process's end)
        if failure:
            raise failure[0]
        self.stats = SegmentStats(
            session_loads=int(header["session_loads"]),
            session_loads_total=int(header["session_loads_total"]),
            session_models=tuple(str(name) for name in header.get("session_models", [])),
            sampled=int(header["sampled"]),
            flagged=int(header["flagged"]),
            phases={str(name): float(seconds) for name, seconds in header.get("phases", {}).items()},
            pre_checked=bool(header.get("pre_checked")),
            released=tuple(str(name) for name in header.get("released", [])),
        )
        if self.stats.released:
            logger.info("warm FaceFusion %s released the sessions of %s", process.pid, ", ".join(self.stats.released))
        # What a warm segment cost FaceFusion, in the worker's log (the farm's tests count these).
        logger.info(
            "warm FaceFusion %s: %s frames, %s inference sessions created (%s in all: %s), %s frames analysed; "
            "frames through %s",
            process.pid, produced, self.stats.session_loads, self.stats.session_loads_total,
            ", ".join(self.stats.session_models) or "none", self.stats.sampled, self.transport,
        )  # fmt: skip
        if produced != len(sent):
            raise EngineError(failures.frame_count_reason(produced, len(sent), process.log_tail(mark)))
        if self._decided:
            return  # the job's verdict was made once over the whole video
        rate = 100.0 * self.stats.flagged / self.stats.sampled if self.stats.sampled else 0.0
        if rate > failures.ANALYSER_LIMIT_PERCENT:
            raise EngineError(
                f"FaceFusion's content analyser refused the target: it flagged {rate:g} % of the sampled frames "
                f"(its limit is {failures.ANALYSER_LIMIT_PERCENT:g} %)"
            )

    def _idle_process(self) -> tuple[EngineSettings, WarmProcess]:
        """The engine's settings and a live warm process with nothing half-done in it (one left mid-request
        is stopped: its answers would be out of step), started where there is none."""
        if self._home is None:
            self.prepare()
        settings = self._settings
        assert settings is not None
        if self._process is not None and self._unfinished:
            self._process.stop(graceful=False)
            self._process = None
        process = self._process if self._process is not None and self._process.alive() else self._start()
        return settings, process

    def analyse_content(self, images: Iterable[Image]) -> list[bool]:
        """FaceFusion's content analyser on each image, in this warm process (ContentAnalyser)."""
        settings, process = self._idle_process()
        mark = process.log_size()
        try:
            process.send({"op": "analyse", "argv": ["headless-run", *self._execution, *log_args()]})
            header, _ = process.receive(deadline(settings.timeout_base_s), "checking the content analyser")
            if header["op"] != "ready":
                reason = f"FaceFusion's content analyser could not run: {header.get('reason', header)}"
                raise EngineError(failures.with_output(reason, process.log_tail(mark)))
            self._unfinished = True
            count = 0
            for image in images:
                height, width = image.shape[:2]
                process.send({"op": "frame", "shape": [height, width]}, np.ascontiguousarray(image).tobytes())
                count += 1
            process.send({"op": "end"})
            header, _ = process.receive(deadline(settings.timeout_base_s), "analysing the target")
            self._unfinished = False
        except ServerGone:
            self._process = None
            raise
        if header["op"] != "analysed" or len(header["flags"]) != count:
            reason = f"FaceFusion's content analyser failed: {header.get('reason', header)}"
            raise EngineError(failures.with_output(reason, process.log_tail(mark)))
        return [bool(flag) for flag in header["flags"]]

    def extract_voice(self, job: EngineJob, out: Path) -> tuple[int, ...]:
        """The job's voice, as FaceFusion's read_voice extracts it with the job's options, kept at `out`
        (a .npy of the spectrogram its frames are cut from: warm_sound.voice_spectrogram). Its shape."""
        try:  # not check_options: the step has the job's audio, not its face images, and needs only these
            options = validate_options(dict(job.options))
        except OptionsError as error:
            raise EngineError("FaceFusion cannot take these options: " + "; ".join(error.problems)) from error
        heard = sound(job)
        if job.audio is None or heard is None:
            raise EngineError("the job has no audio source to extract a voice from")
        _, process = self._idle_process()
        mark = process.log_size()
        argv = ["headless-run", *option_args(options), *self._execution, *log_args()]
        try:
            process.send({"op": "voice", "argv": argv, "audio": str(job.audio.absolute()), "fps": heard["fps"],
                          "out": str(out.absolute())})  # fmt: skip
            # The whole file in one answer: the analysis step's own limit bounds it (the engine host's);
            # this one only catches a process that hangs where no host watches (inline).
            header, _ = process.receive(deadline(VOICE_TIMEOUT_S), "extracting the voice")
        except ServerGone:
            self._process = None
            raise
        if header["op"] == "refused" and header.get("job_inputs"):
            reason = f"FaceFusion refused the audio source: {header['reason']}"
            raise InputRejected(failures.with_output(reason, process.log_tail(mark)))
        if header["op"] != "voiced":
            reason = f"FaceFusion's voice extractor failed: {header.get('reason', header)}"
            raise EngineError(failures.with_output(reason, process.log_tail(mark)))
        logger.info("warm FaceFusion %s extracted the voice in %s s", process.pid, header.get("seconds"))
        return tuple(int(size) for size in header["shape"])

    def close(self) -> None:
        if self._process is not None:
            self._process.stop()
            self._process = None
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None


def _segment_paths(folder: Path, source_count: int, audio: Path | None = None) -> RunPaths:
    for name in ("temp", "jobs"):
        (folder / name).mkdir(parents=True, exist_ok=True)
    (folder / "facefusion.ini").write_text("")
    return RunPaths(
        config=folder / "facefusion.ini",
        temp=folder / "temp",
        jobs=folder / "jobs",
        sources=tuple(folder / f"source-{index}.png" for index in range(source_count)),
        target=folder / "reference.png",
        output=folder / "output.png",
        # Where the worker keeps the job's copy (one path per job, so FaceFusion's audio cache, keyed
        # by path, never answers one job with another's sound).
        audio=None if audio is None else audio.absolute(),
    )
