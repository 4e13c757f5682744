"""The tenant API's answers as models: the routes return these, and docs/openapi.json is generated from them.

Each model's fields are in the order the API has always written them, and a field marked `omitted`
is left out of the JSON while it has no value (as the hand-built answers did), so the bytes a client
reads are unchanged. `extra="forbid"`: a key the read model grows without its field here fails the API's
tests instead of reaching clients undocumented.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from fusionfleet.jobs.manifest import Manifest
from fusionfleet.jobs.states import Action, JobState, SegmentState

# Numbers kept as they were given: an int stays an int (a float field would write 0 as 0.0).
Number = Annotated[int | float, WithJsonSchema({"type": "number"})]


def _absent(value: object) -> bool:
    return value is None


def omitted(description: str) -> Any:
    """A field the JSON has only when it has a value."""
    return Field(default=None, exclude_if=_absent, description=description)


class JobRequest(Manifest):
    """The body of POST /jobs: a manifest (fusionfleet.jobs.manifest, checked exactly as a dropped one is)
    whose plain file names (`face.jpg`, no `/`: in `source`, `target`, `targets`, `reference` and each
    mapping of `faces`) are uploaded through the API, and each file's size."""

    sizes: dict[str, int] | None = Field(
        default=None, description="each file's size in bytes: a file over the upload limit is refused at once"
    )


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Error(_Answer):
    """Every refusal: what went wrong, and for a bad body every problem found."""

    error: str
    problems: list[str] | None = omitted("a refused body's problems, each on its own")


class Counts(_Answer):
    done: int
    failed: int
    total: int


class ItemCounts(_Answer):
    done: int
    failed: int
    running: int
    total: int


class FrameLink(_Answer):
    frame: int
    download_url: str


class Job(_Answer):
    """A job as the read model shows it (fusionfleet.jobs.views.tenant_json): its state, progress and the
    actions it allows now."""

    job_id: str
    state: JobState
    segments: Counts
    ended: bool
    actions: list[Action]
    priority: str | None = omitted("high, normal or low")
    reason: str | None = omitted("why it is waiting, failed or was refused")
    download_url: str | None = omitted(
        "a succeeded job's output, a link valid for minutes (a batch has none: each of its items has its own)"
    )
    created_at: str | None = omitted("when it was created (ISO 8601)")
    frames: list[FrameLink] | None = omitted("a succeeded test render's pictures, one link per frame")
    targets: list[str] | None = omitted("while PENDING: the target's (a batch's targets') file names")
    kind: Literal["batch"] | None = omitted("present on a batch")
    items: ItemCounts | None = omitted("a batch's items")


class Upload(_Answer):
    """One file to send: an HTML-form POST to `url` with every entry of `fields`, then `file`."""

    name: str
    key: str
    url: str
    fields: dict[str, str]


class Created(_Answer):
    job_id: str
    uploads: list[Upload]
    expires_in: int
    max_upload_bytes: int


class JobPage(_Answer):
    jobs: list[Job]
    next: str | None = Field(description="the cursor of the next page; null on the last")
    now: str


class Segment(_Answer):
    index: int
    start_frame: int
    end_frame: int
    state: SegmentState
    worker: str
    attempt: int


class Attempt(_Answer):
    segment: int
    attempt: int
    worker: str
    status: str
    started_at: Number
    finished_at: Number
    engine_s: Number
    error: str
    reason: str
    copy_number: int


class Item(_Answer):
    """One target of a batch (fusionfleet.jobs.batch_views.tenant_item_json)."""

    index: int
    target: str
    state: JobState
    segments: Counts
    output: str | None
    ended: bool
    reason: str | None = omitted("why it did not succeed")
    download_url: str | None = omitted("its output, once it succeeded")


class Detail(_Answer):
    """A job's page: its view, one page of its segments, its first attempts, timings, cost (null while it
    runs) and webhook deliveries."""

    job: Job
    segments: list[Segment]
    next_segment: int | None
    attempts: list[Attempt]
    timings: dict[str, Any]
    cost: dict[str, Any] | None
    deliveries: list[dict[str, Any]]
    preview: bool
    now: str


class BatchDetail(Detail):
    """A batch's page: as a job's, with one page of its items."""

    items: list[Item]
    next_item: int | None = Field(description="the first item of the next page; null on the last")


class SegmentLogs(_Answer):
    """Every attempt of one segment (`?segment=N`)."""

    job_id: str
    attempts: list[Attempt]


class Logs(SegmentLogs):
    """A page of attempts in segment order."""

    next: str | None = Field(description="the cursor of the next page; null on the last")


class Preview(_Answer):
    job_id: str
    image: str = Field(description="the latest swapped frame, a data: URL of a JPEG")


class Message(_Answer):
    job_id: str
    message: str


class OptionDescription(_Answer):
    """One FaceFusion option a job's `options` may set (fusionfleet.facefusion.catalogue): its kind, its
    choices or range (a grid of `step`), how many values it takes, and FaceFusion's own default."""

    name: str
    kind: Literal["str", "int", "float"]
    multiple: bool
    choices: list[str | int | float] | None
    minimum: Number | None
    maximum: Number | None
    step: Number | None
    max_values: int | None
    group: str = Field(description="FaceFusion's group: a processor's options are in the group of its name")
    help: str
    default: Any = Field(description="FaceFusion's default: a value, a list of values, or null (none)")


class ModelChoices(_Answer):
    """Choices of an option that follow the model another option picks (a detector's sizes)."""

    model_option: str
    default_model: str
    by_model: dict[str, list[str]]


class OptionCatalogue(_Answer):
    """What a job may ask of the farm: its engines and FaceFusion's options, as the farm checks them."""

    facefusion_version: str
    engines: list[str]
    default_engine: str
    options: list[OptionDescription]
    dependent_choices: dict[str, ModelChoices]
