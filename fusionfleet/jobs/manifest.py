"""The job manifest (version 1): parsing and validation into a frozen model.

One pass checks everything a manifest says before any media is looked at: its fields, its keys,
its FaceFusion options and the fleet's rules for the output encoder. Every problem is reported at
once, each as one sentence naming the field, so a user fixes a manifest in one go. Unknown fields
and options are errors, never silently ignored.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fusionfleet import key_rules, layout
from fusionfleet.errors import JobRejected
from fusionfleet.facefusion.options import OptionsError, validate_options
from fusionfleet.jobs.faces import MAX_FACES, FaceMapping, mapping_problems
from fusionfleet.jobs.image_output import IMAGE_EXTENSIONS, extension_of
from fusionfleet.jobs.output_format import (
    MUXERS,
    container_of_key,
    default_video_suffix,
    fix_audio_encoder,
    output_problems,
    video_encoder_problem,
)
from fusionfleet.webhooks.addresses import AddressPolicy, WebhookRefused, check_url
from fusionfleet.webhooks.events import EventKind, metadata_problem

# The names a manifest may use, defined here only; everything else imports them.
EngineName = Literal["classic", "copy", "facefusion"]
Priority = Literal["high", "normal", "low"]  # also the order in which workers ask the render queues
Quality = Literal["realtime", "balanced", "cinema"]  # the built-in engine's presets
ENGINE_NAMES: tuple[EngineName, ...] = get_args(EngineName)
PRIORITIES: tuple[Priority, ...] = get_args(Priority)
QUALITIES: tuple[Quality, ...] = get_args(Quality)
MAX_MANIFEST_BYTES = 64 * 1024
MAX_SOURCES = 16
MAX_TARGETS = 1000  # items of one batch (their ids carry a four-digit index)
MAX_TRY_FRAMES = 16  # frames of one test render
MAX_CUTS = 4096  # cuts a manifest's own plan may name (a Distributed Map runs thousands of segments)

ENCODER_PRESETS = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow")


@dataclass(frozen=True)
class KeyPolicy:
    """Which keys a manifest may name. Inputs anywhere but the reserved prefixes; outputs under outputs/.

    The default is the single-tenant drop (`jobs/`): it may name nothing under `tenants/`.
    """

    input_prefixes: tuple[str, ...] = ()
    output_prefixes: tuple[str, ...] = (layout.OUTPUT_PREFIX,)
    reserved_prefixes: tuple[str, ...] = (layout.MANIFEST_PREFIX, layout.WORK_PREFIX, layout.TENANTS_PREFIX)
    # Where webhooks may go (https and public addresses on AWS; the local stack allows its loopback).
    webhooks: AddressPolicy = dataclasses.field(default_factory=AddressPolicy)
    # The fleet's encoder device (VIDEO_ENCODER_DEVICE): whether a manifest may name NVENC.
    encoder_device: str = "cpu"

    def for_manifest(self, manifest_key: str) -> KeyPolicy:
        """A tenant's manifest may name only its own tenant's keys, and write only its own outputs."""
        tenant = layout.tenant_of(manifest_key)
        if tenant is None:
            return self
        return KeyPolicy(
            input_prefixes=(layout.tenant_prefix(tenant),),
            output_prefixes=(layout.tenant_output_prefix(tenant),),
            reserved_prefixes=(layout.tenant_manifest_prefix(tenant), layout.WORK_PREFIX),
            webhooks=self.webhooks,
            encoder_device=self.encoder_device,
        )


class PlanRequest(BaseModel):
    """A job's own plan: this many segments of (nearly) equal length, or a segment starting at each cut."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    segments: int | None = Field(default=None, ge=1)
    cut_at: tuple[int, ...] = Field(default=(), max_length=MAX_CUTS)

    @field_validator("cut_at", mode="before")
    @classmethod
    def _listed(cls, value: object) -> object:
        return tuple(value) if isinstance(value, list) else value


class Manifest(BaseModel):
    """A job (`target`), a batch of jobs with the same settings (`targets`: keys or prefixes), or a test
    render of a few frames (`target` and `frames`, or `spread_frames` for that many spread over it).
    `source` or `faces` names the faces."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    version: Literal[1] = 1
    source: tuple[str, ...] = Field(default=(), max_length=MAX_SOURCES)
    target: str = ""
    targets: tuple[str, ...] = Field(default=(), max_length=MAX_TARGETS)
    output: str | None = None
    priority: Priority = "normal"
    engine: str | None = None
    quality: Quality = "balanced"
    reference: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    # The job's webhook (fusionfleet.webhooks): where its events go, which ones, and the caller's own
    # metadata, echoed back in every event. The URL's form is checked here, its addresses at each delivery.
    webhook: str | None = None
    webhook_events: tuple[EventKind, ...] | None = None
    metadata: dict[str, Any] | None = None
    faces: tuple[FaceMapping, ...] = Field(default=(), max_length=MAX_FACES)
    frames: tuple[int, ...] = Field(default=(), max_length=MAX_TRY_FRAMES)
    # A test render of this many frames evenly spread over the target (its trimmed range), which the slicer
    # chooses once it knows the target's length (fusionfleet.jobs.trial.spread_frames): a poster strip.
    spread_frames: int = Field(default=0, ge=0, le=MAX_TRY_FRAMES)
    item_notices: bool = False  # a batch: every item's own notice too, not only the batch's summary
    plan: PlanRequest | None = None  # where the job is cut, when the user says (else the slicer decides)

    @field_validator("source", "targets", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        # A single face may be given as a string; it means a list of one.
        return (value,) if isinstance(value, str) else tuple(value) if isinstance(value, list) else value

    @field_validator("webhook_events", mode="before")
    @classmethod
    def _events_list(cls, value: object) -> object:
        return tuple(value) if isinstance(value, list) else value

    @field_validator("metadata")
    @classmethod
    def _small_metadata(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        problem = metadata_problem(value) if value is not None else None
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("faces", "frames", mode="before")
    @classmethod
    def _listed(cls, value: object) -> object:
        return tuple(value) if isinstance(value, list) else value

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, value: str | None) -> str | None:
        if value is not None and value not in ENGINE_NAMES:
            raise ValueError(f"{value!r} is not one of {', '.join(ENGINE_NAMES)}")
        return value

    @property
    def is_batch(self) -> bool:
        return bool(self.targets)

    @property
    def is_try(self) -> bool:
        return bool(self.frames) or self.spread_frames > 0

    @property
    def all_sources(self) -> tuple[str, ...]:
        """Every face image the job reads: `source`, or each mapping's in order."""
        return self.source or tuple(key for face in self.faces for key in face.source)

    def item(self, target: str, output: str) -> Manifest:
        """One target of a batch as a job of its own, with the batch's sources, options and priority."""
        return self.model_copy(update={"target": target, "targets": (), "output": output, "item_notices": False})


# FaceFusion options no engine of the fleet applies, with the reason a user is told.
REFUSED_OPTIONS: Mapping[str, str] = MappingProxyType({})
# The options the fleet's own rules judge (beyond FaceFusion's).
ENCODER_OPTIONS = ("output_video_encoder", "output_video_preset", "output_audio_encoder", *REFUSED_OPTIONS)


def encoder_option_problems(options: Mapping[str, object], device: str = "cpu") -> list[str]:
    """The fleet's rules for the output options, beyond FaceFusion's own: no worker has AMF, Quick Sync or
    VideoToolbox, and NVENC only where the fleet's encoder `device` is NVENC (every segment of a job is encoded
    alike by every worker). What the output's container holds is judged with the keys (`_format_problems`)."""
    problems = []
    codec = options.get("output_video_encoder")
    if codec is not None and (problem := video_encoder_problem(str(codec), device)):
        problems.append(problem)
    preset = options.get("output_video_preset")
    if preset is not None and str(preset) not in ENCODER_PRESETS:
        problems.append(f"options.output_video_preset: {preset!r} is not one of {', '.join(ENCODER_PRESETS)}")
    problems.extend(
        f"options.{name} is not supported: {why}" for name, why in REFUSED_OPTIONS.items() if name in options
    )
    return problems


def _facefusion_accepts(name: str, value: object) -> bool:
    """Whether FaceFusion's own rules take this option (if not, that problem is reported already)."""
    try:
        validate_options({name: value})
    except OptionsError:
        return False
    return True


def check_encoder_options(options: Mapping[str, object], device: str = "cpu") -> None:
    """Raise JobRejected with every encoder problem, for callers that build settings without a manifest."""
    problems = encoder_option_problems(options, device)
    if problems:
        raise JobRejected(_summary(problems), tuple(problems))


def _describe(error: dict[str, Any]) -> str:
    where = ".".join(str(part) for part in error["loc"]) or "manifest"
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"{where}: unknown field"
    if kind == "missing":
        return f"{where}: is required"
    if kind == "too_short":
        return f"{where}: needs at least {error.get('ctx', {}).get('min_length', 1)} entry"
    if kind == "too_long":
        return f"{where}: takes at most {error.get('ctx', {}).get('max_length')} entries"
    if kind == "literal_error":
        expected = error.get("ctx", {}).get("expected", "")
        return f"{where}: {error['input']!r} is not one of {expected}"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}"


def _missing(data: Mapping[str, Any]) -> list[str]:
    """The faces and the target(s) a manifest lacks; judged on the raw fields too, so that a manifest
    with other problems still hears of these."""
    problems = []
    if not data.get("source") and not data.get("faces"):
        problems.append("source: is required (or `faces`, mapping each source to a person)")
    if not data.get("target") and not data.get("targets"):
        problems.append("target: is required (or `targets`, a list of keys and prefixes, for a batch)")
    return problems


def _shape_problems(manifest: Manifest) -> list[str]:
    """Which of a job, a batch and a test render the manifest is, and whether its fields agree."""
    problems = _missing(manifest.model_dump())
    if manifest.target and manifest.targets:
        problems.append("target and targets: give one of them (`targets` makes a batch of one job per target)")
    if manifest.frames and manifest.targets:
        problems.append("frames: a test render renders frames of one `target`, not of a batch's `targets`")
    if manifest.spread_frames and manifest.frames:
        problems.append("frames and spread_frames: give one of them (`spread_frames` has the farm choose the frames)")
    if manifest.spread_frames and manifest.targets:
        problems.append("spread_frames: a test render renders frames of one `target`, not of a batch's `targets`")
    if any(frame < 0 for frame in manifest.frames):
        problems.append("frames: frame numbers start at 0")
    if len(set(manifest.frames)) != len(manifest.frames):
        problems.append("frames: each frame once")
    if manifest.item_notices and not manifest.targets:
        problems.append("item_notices: applies to batches (a manifest with `targets`)")
    if manifest.source and manifest.faces:
        problems.append("source and faces: give one of them (with `faces` each mapping names its own sources)")
    if manifest.faces and manifest.reference:
        problems.append("reference: with `faces` each mapping names its own reference")
    if len(manifest.all_sources) > MAX_SOURCES:
        problems.append(f"faces: {len(manifest.all_sources)} source images in all, more than {MAX_SOURCES}")
    problems.extend(mapping_problems(manifest.faces, manifest.options))
    return problems


def _key_problems(manifest: Manifest, policy: KeyPolicy) -> list[str]:
    problems = []
    named = [(f"source[{i}]", key) for i, key in enumerate(manifest.source)]
    if manifest.target:
        named.append(("target", manifest.target))
    if manifest.reference:
        named.append(("reference", manifest.reference))
    for index, face in enumerate(manifest.faces):
        named.extend((f"faces[{index}].source[{i}]", key) for i, key in enumerate(face.source))
        if face.reference:
            named.append((f"faces[{index}].reference", face.reference))
    for index, target in enumerate(manifest.targets):
        # A prefix (ending in '/') names every target under it; it is checked as the key it ends.
        named.append((f"targets[{index}]", target.removesuffix("/") if target.endswith("/") else target))
    for field, key in named:
        why = key_rules.key_problem(key, policy.input_prefixes, policy.reserved_prefixes)
        if why:
            problems.append(f"{field}: key {key!r} {why}")
    if manifest.output is not None:
        problems.extend(_output_problems(manifest, policy))
    return problems


def _webhook_problems(manifest: Manifest, addresses: AddressPolicy) -> list[str]:
    problems = []
    if manifest.webhook is not None:
        try:
            check_url(manifest.webhook, addresses)
        except WebhookRefused as refused:
            problems.append(f"webhook: {refused.reason}")
    if manifest.webhook_events is not None:
        if manifest.webhook is None:
            problems.append("webhook_events: needs a webhook")
        elif not manifest.webhook_events:
            problems.append("webhook_events: name at least one event (or leave it out for all of them)")
    return problems


def _output_problems(manifest: Manifest, policy: KeyPolicy) -> list[str]:
    output = manifest.output or ""
    several = manifest.is_batch or manifest.is_try
    why = key_rules.key_problem(
        output.removesuffix("/") if several else output, policy.output_prefixes, policy.reserved_prefixes
    )
    if why:
        return [f"output: key {output!r} {why}"]
    if several and not output.endswith("/"):
        what = (
            "a batch writes one output per target" if manifest.is_batch else "a test render writes one image per frame"
        )
        return [f"output: {output!r} must be a prefix ending in '/': {what} under it"]
    container = container_of_key(output)
    if not several and container is None and extension_of(output) not in IMAGE_EXTENSIONS:
        return [
            f"output: key {output!r} must end in a video container FaceFusion writes "
            f"({', '.join('.' + name for name in MUXERS)}) for a video target, or an image extension "
            f"({', '.join(IMAGE_EXTENSIONS)}) for an image target"
        ]
    if container is not None:
        # What the named container cannot hold is said now; the fleet's device and the target at planning.
        return [problem for problem in output_problems(container, "", None) if problem.startswith("output:")]
    return []


def _format_problems(manifest: Manifest) -> list[str]:
    """A named audio encoder the video output's container cannot hold (after FaceFusion's own swap), said
    before any media is read: the container is the output key's, or the target's for a default output."""
    encoder = manifest.options.get("output_audio_encoder")
    if encoder is None or manifest.is_batch or manifest.is_try or extension_of(manifest.target) in IMAGE_EXTENSIONS:
        return []
    container = container_of_key(manifest.output or default_video_suffix(manifest.target))
    if container is None:
        return []  # an image's output: no sound
    return [
        problem
        for problem in output_problems(container, "", fix_audio_encoder(container, str(encoder)))
        if problem.startswith("options.output_audio_encoder")
    ]


def parse_manifest(raw: bytes, manifest_key: str, policy: KeyPolicy | None = None) -> Manifest:
    """Validate a manifest's bytes; options normalised, a batch's or test render's output prefix filled in.

    A job's output is left as given: its default (`outputs/<name>.mp4`, or the image's own extension)
    depends on what the target turns out to be, which the slicer learns from its bytes."""
    policy = (policy or KeyPolicy()).for_manifest(manifest_key)
    if len(raw) > MAX_MANIFEST_BYTES:
        raise JobRejected(f"the manifest is {len(raw)} bytes, over the limit of {MAX_MANIFEST_BYTES}")
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise JobRejected(f"the manifest is not UTF-8 text: {error.reason} at byte {error.start}") from error
    except json.JSONDecodeError as error:
        raise JobRejected(
            f"the manifest is not valid JSON: {error.msg} at line {error.lineno} column {error.colno}"
        ) from error
    if not isinstance(data, dict):
        raise JobRejected(f"the manifest must be a JSON object, not {type(data).__name__}")
    problems: list[str] = []
    options: dict[str, object] = {}
    raw_options = data.get("options", {})
    if isinstance(raw_options, dict):
        try:
            options = validate_options(raw_options)
        except OptionsError as error:
            problems.extend(error.problems)
        # The fleet's rules judge only what FaceFusion takes, so no value is reported twice.
        taken = {
            name: raw_options[name]
            for name in ENCODER_OPTIONS
            if name in raw_options and _facefusion_accepts(name, raw_options[name])
        }
        problems.extend(encoder_option_problems(taken, policy.encoder_device))
    try:
        manifest = Manifest.model_validate(
            {**data, "options": options if isinstance(raw_options, dict) else raw_options}
        )
    except ValidationError as error:
        problems.extend(_describe(dict(item)) for item in error.errors())
        named = {problem.split(":", 1)[0].split(".")[0].split("[")[0] for problem in problems}
        problems.extend(problem for problem in _missing(data) if problem.split(":", 1)[0] not in named)
        raise JobRejected(_summary(problems), tuple(problems)) from error
    problems.extend(_shape_problems(manifest))
    problems.extend(_key_problems(manifest, policy))
    problems.extend(_webhook_problems(manifest, policy.webhooks))
    if not problems:
        problems.extend(_format_problems(manifest))
    if problems:
        raise JobRejected(_summary(problems), tuple(problems))
    if manifest.output is None and (manifest.is_batch or manifest.is_try):
        manifest = manifest.model_copy(update={"output": layout.default_output_prefix(manifest_key)})
    return manifest


def invalid_manifest(problems: list[str]) -> JobRejected:
    """The rejection for a manifest with these problems, every one of them listed."""
    return JobRejected(_summary(problems), tuple(problems))


def _summary(problems: list[str]) -> str:
    head = "the manifest is invalid: " + "; ".join(problems[:10])
    return head + (f"; and {len(problems) - 10} more" if len(problems) > 10 else "")
