"""The per-segment FaceFusion engine: each segment goes through one `facefusion.py headless-run`.

The warm engine (warm.py) is the default; this one stays selectable (FUSIONFLEET_FACEFUSION_MODE=
per-segment) and the harness tests compare the two frame by frame while both exist.

The frames are written to a lossless video, FaceFusion renders it like any target, and its output
is decoded back into one image per frame. Anything short of exactly that (no output, missing
frames, a refusal, a hang) is an EngineError carrying FaceFusion's own reason.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from fusionfleet.errors import InputRejected
from gpu_worker.engines.base import EngineError, EngineJob, EngineUnavailable, Frame, Image
from gpu_worker.engines.facefusion import failures
from gpu_worker.engines.facefusion.argv import headless_run_argv, run_paths
from gpu_worker.engines.facefusion.execution import (
    HostFacts,
    execution_args,
)
from gpu_worker.engines.facefusion.host_facts import gather_facts
from gpu_worker.engines.facefusion.job_options import check_options, look_ahead, reference_position
from gpu_worker.engines.facefusion.media import read_output, write_sources, write_target
from gpu_worker.engines.facefusion.process import (
    Runner,
    TimedOut,
)
from gpu_worker.engines.facefusion.settings import EngineSettings, resolve_home, settings_from_env
from gpu_worker.engines.facefusion.warm import WarmFaceFusionEngine

logger = logging.getLogger(__name__)

# core.pre_check: FaceFusion exits (code 2) unless these are on PATH.
REQUIRED_TOOLS = ("curl", "ffmpeg", "ffprobe")


def missing_tools(path: str | None) -> list[str]:
    return [tool for tool in REQUIRED_TOOLS if shutil.which(tool, path=path) is None]


class FaceFusionEngine:
    name = "facefusion"

    def __init__(
        self,
        settings: EngineSettings | None = None,
        facts: HostFacts | None = None,
        *,
        env: Mapping[str, str],
    ) -> None:
        self._env = dict(env)
        self._settings = settings
        self._facts = facts
        self._home: Path | None = None
        self._execution: list[str] = []
        self._runner = Runner()
        self._sounding: WarmFaceFusionEngine | None = None  # renders the jobs with an audio source

    def prepare(self) -> None:
        settings = self._settings or settings_from_env(self._env)
        home = resolve_home(settings)
        missing = missing_tools(self._env.get("PATH"))
        if missing:
            raise EngineUnavailable(
                f"FaceFusion cannot run on this worker: {', '.join(missing)} not on PATH (its pre-check needs them)"
            )
        facts = self._facts or gather_facts(settings, home, self._env)
        self._execution = execution_args(facts, settings.worker_index, settings.gpu_device, settings.thread_count)
        self._settings, self._facts, self._home = settings, facts, home
        logger.info("FaceFusion at %s, onnxruntime offers %s: %s", home, ", ".join(facts.providers), self._execution)

    def validate(self, job: EngineJob) -> None:
        self._one_run(job)
        if job.alpha:
            # Its frames go through an MP4 and come back decoded as BGR: the matte would be lost.
            raise EngineError(
                "the per-segment FaceFusion engine reads FaceFusion's output back without its alpha, and this job "
                "keeps background_remover's transparency: run the warm engine (FUSIONFLEET_FACEFUSION_MODE unset)"
            )
        check_options(job)

    @staticmethod
    def _one_run(job: EngineJob) -> None:
        """Refused rather than rendered as if `faces` were absent: chained passes are the warm engine's."""
        if job.people:
            raise EngineError(
                "the per-segment FaceFusion engine renders one run per segment, not one pass per person of `faces`: "
                "run the warm engine (FUSIONFLEET_FACEFUSION_MODE unset)"
            )

    def lead_out_frames(self, job: EngineJob) -> int:
        return look_ahead(job.options)

    def render(self, job: EngineJob, frames: Iterable[Frame]) -> Iterator[Image]:
        self._one_run(job)
        options = check_options(job)
        if self._home is None:
            self.prepare()
        if job.audio is not None:
            # A headless-run of one segment numbers its frames from the segment's start, and FaceFusion
            # hears the source audio by those numbers: a job with an audio source renders in a warm
            # process instead, which gives each frame its number in the whole target.
            yield from self._warm().render(job, frames)
            return
        settings, home = self._settings, self._home
        assert settings is not None and home is not None
        job.work_dir.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="facefusion-", dir=job.work_dir))
        try:
            paths = run_paths(folder, len(job.sources), job.audio)
            for created in (paths.temp, paths.jobs):
                created.mkdir()
            paths.config.write_text("")
            write_sources(job.sources, paths.sources)
            # A reference image goes in front of the frames, as the frame FaceFusion takes the
            # reference face from; the trim then leaves it out of the output.
            picture = job.reference if options.get("face_selector_mode", "reference") == "reference" else None
            target = write_target(frames, paths.target, job.fps, picture)
            if target is None:
                return
            reference = 0 if target.offset else reference_position(options, target.indices, target.emits)
            wanted = options.get("reference_frame_number")
            if not target.offset and isinstance(wanted, int) and wanted not in target.indices:
                logger.info("reference frame %s is not in this segment; using its frame %s", wanted, reference)
            argv = headless_run_argv(
                settings.python, home, paths, options, (target.offset, target.count), reference,
                target.padded, settings.raw_output_limit_bytes, self._execution, job.content_decided,
            )  # fmt: skip
            timeout_s = settings.timeout_s(target.offset + target.count)
            # FaceFusion's logs and progress bars as they come, so a hung run can be told apart.
            env = {**self._env, "PYTHONUNBUFFERED": "1"}
            try:
                completed = self._runner.run(argv, home, env, timeout_s, folder / "facefusion.log")
            except TimedOut as error:
                raise EngineError(
                    f"FaceFusion did not finish {target.count} frames within {error.timeout_s:.0f} s and was stopped: "
                    f"{failures.last_words(error.log)}"
                ) from None
            logger.info("FaceFusion exited with %s after %.1f s", completed.exit_code, completed.wall_s)
            if completed.exit_code != 0:
                refusal = failures.input_refusal(completed.log)
                if refusal is not None:
                    raise InputRejected(refusal)  # no retry, no blocklisting: the reason reaches the user
                raise EngineError(failures.failure_reason(completed.exit_code, completed.log))
            if not paths.output.is_file():
                raise EngineError(failures.missing_output_reason(completed.log))
            yield from read_output(paths.output, target, completed.log)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def analyse_content(self, images: Iterable[Image]) -> list[bool]:
        """FaceFusion's content analyser on each image (ContentAnalyser), for the job's verdict.

        FaceFusion's CLI analyses only whole runs, so this borrows a warm FaceFusion process for as
        long as the analysis takes: once per job, on the segment that makes the verdict.
        """
        if self._home is None:
            self.prepare()
        analyser = WarmFaceFusionEngine(self._settings, self._facts, env=self._env)
        try:
            return analyser.analyse_content(images)
        finally:
            analyser.close()

    def extract_voice(self, job: EngineJob, out: Path) -> tuple[int, ...]:
        """The job's voice, once per job (VoiceExtractor), in the warm process that renders its segments."""
        if self._home is None:
            self.prepare()
        return self._warm().extract_voice(job, out)

    def _warm(self) -> WarmFaceFusionEngine:
        if self._sounding is None:
            self._sounding = WarmFaceFusionEngine(self._settings, self._facts, env=self._env)
        return self._sounding

    def close(self) -> None:
        self._runner.stop()
        if self._sounding is not None:
            self._sounding.close()
            self._sounding = None
