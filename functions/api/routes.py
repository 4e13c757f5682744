"""The HTTP API's routes, on the one JSON layer both APIs share (fusionfleet.json_http):

    POST /jobs                   201 {"job_id", "uploads": [{"name", "key", "url", "fields"}], "expires_in",
                                     "max_upload_bytes"}; each file is an HTML-form POST of `fields` + `file`
    POST /jobs/{job_id}/start    202 {"job_id", "state": "PENDING", ...}
    GET  /jobs/{job_id}          200 {"job_id", "state", "segments": {"done", "failed", "total"}, "ended",
                                      "actions", "reason"?, "download_url"?, "created_at"?, "priority"?,
                                      "frames"?: [{"frame", "download_url"}] (a test render's pictures),
                                      "targets"? (while PENDING: the target's, or a batch's targets', names)}
    GET  /jobs                   200 {"jobs": [...], "now"}   (the caller's own, newest first; ?limit=1..200)
    GET  /jobs/{job_id}/detail   200 {"job": <as GET /jobs/{id}>, "segments", "attempts", "timings", "cost",
                                      "deliveries", "preview": bool, "now"}; a batch's also "items" (a page:
                                      ?items_from=N&items=M, each {"index", "target", "state", "segments",
                                      "output", "download_url"?, "reason"?}) and "next_item"
    GET  /jobs/{job_id}/logs     200 {"job_id", "attempts": [...]}   (?segment=N: one segment's)
    GET  /jobs/{job_id}/preview  200 {"job_id", "image": "data:image/jpeg;base64,..."}, 404 before the first
    POST /jobs/{job_id}/cancel   202 {"job_id", "message"}
    POST /jobs/{job_id}/retry    202 {"job_id", "message"}
    GET  /options                200 {"facefusion_version", "engines", "default_engine", "options": [...],
                                     "dependent_choices"}: what a job's `engine` and `options` may say
    GET  /openapi.json           200 this API's OpenAPI 3.1 document (docs/openapi.json), without a token

Each answer is a model of functions.api.models, whose JSON is what is listed here.

A job is the read model's view of it (fusionfleet.jobs.views.tenant_json), actions included. Workers
are not served: they are the operator's fleet, shared by every tenant, and what one renders names
other tenants' jobs.

The token was verified before this runs (API Gateway's JWT authorizer, or the local gateway): here its
claims name the tenant, after the handler's own checks (functions.api.claims). A token refused by
those is 401; one without a valid tenant claim is 403; an unknown job, or another tenant's, is 404
(ids do not reveal whether they exist); a bad body is 400 with every problem; an action the job's
state does not allow is 409.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import cache
from typing import Annotated, Any, cast

from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from functions.api import models
from functions.api.claims import TokenRules, token_problem
from fusionfleet import layout
from fusionfleet.environment.api import ApiEnvironment
from fusionfleet.facefusion.catalogue import CATALOGUE, DEFAULTS, DEPENDENT_CHOICES, FACEFUSION_VERSION
from fusionfleet.jobs.batch_views import DEFAULT_ITEM_PAGE, MAX_ITEM_PAGE
from fusionfleet.jobs.manifest import ENGINE_NAMES, MAX_TARGETS
from fusionfleet.jobs.reader import DEFAULT_ATTEMPT_PAGE, DEFAULT_SEGMENT_PAGE
from fusionfleet.jobs.views import JobView, tenant_json
from fusionfleet.json_http import JSON, HttpError, JsonApi, plain
from fusionfleet.services.tenant_jobs import DEFAULT_LIST_LIMIT, TenantJobs

logger = logging.getLogger(__name__)

MAX_LIMIT = 200
MAX_SEGMENT_PAGE = 1000
NO_STORE = {"Cache-Control": "no-store"}
# Answered without a token (API Gateway's route has no authorizer): the API's own description.
DOCUMENT_PATH = "/openapi.json"
_SAID = {
    200: "the answer", 201: "created", 202: "accepted",
    400: "a bad query or body: `problems` lists every problem of a body",
    401: "no token, or one refused (with a `WWW-Authenticate: Bearer` challenge)",
    403: "the token has no valid tenant claim",
    404: "no such job of the caller's (another tenant's job reads the same)",
    409: "what the job's state does not allow now, and why",
    502: "the farm did not answer",
}  # fmt: skip
# The body of POST /jobs is checked as a dropped manifest is, by the service, which lists every problem
# at once: it is described (functions.api.openapi), not validated by Powertools field by field.
_OPEN: dict[str, Any] = {"security": []}
_CREATE_JOB = (
    "Each plain file name gets an upload in the answer. A key of the tenant's own (with '/', such as an "
    "earlier upload's `key`) names a file already in the bucket, which is not sent again. With `frames` "
    "the job is a test render of those frames of its target, one picture each (docs/test-renders.md); with "
    "`spread_frames` N instead, of N frames evenly spread over the target, chosen by the farm once it has "
    "read the target's length (a poster strip: the `copy` engine shows them as they are). With `faces` "
    "(each mapping's own plain file names uploaded too), each mapping puts its sources on one person; on the "
    "`facefusion` engine the mappings are chained passes of one render, each with its own `options` where "
    "it has them: a FaceFusion job file's remix chain, with no encode between its steps (docs/engines.md)."
)
_JOB_BODY = {
    "requestBody": {"required": True, "content": {JSON: {"schema": {"$ref": "#/components/schemas/JobRequest"}}}}
}


def tenant_of(claims: Mapping[str, Any], claim: str) -> str | None:
    value = claims.get(claim)
    return value if isinstance(value, str) and layout.is_tenant_name(value) else None


def claims_of(event: Mapping[str, Any]) -> dict[str, Any]:
    return dict(event.get("requestContext", {}).get("authorizer", {}).get("jwt", {}).get("claims") or {})


def tenant_api(jobs: TenantJobs, tenant: str, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> JsonApi:
    """The routes, serving `tenant`'s jobs. Each returns its answer's model (functions.api.models), from
    which Powertools checks the answer and writes the API's document (functions.api.openapi)."""
    api = JsonApi(trailing_slash=True, headers=NO_STORE, validate=True)
    route = api.route

    def now() -> str:
        return clock().isoformat()

    @route("POST", "/jobs", status_code=201, responses=_answers(201, 400), openapi_extensions=_JOB_BODY,
           description=_CREATE_JOB)  # fmt: skip
    def create_job() -> models.Created:
        """Create a job: its body is a manifest, with plain file names for the files to upload."""
        created = jobs.create(tenant, _body(api))
        uploads = [models.Upload(name=u.name, key=u.key, url=u.url, fields=u.fields) for u in created.uploads]
        logger.info("tenant %s created job %s", tenant, created.job_id)
        return models.Created(job_id=created.job_id, uploads=uploads, expires_in=created.expires_in,
                              max_upload_bytes=created.max_upload_bytes)  # fmt: skip

    @route("GET", "/jobs", responses=_answers(200, 400))
    def list_jobs(
        limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIST_LIMIT,
        after: Annotated[str, Query(alias="next", description="the cursor a page gave as `next`")] = "",
    ) -> models.JobPage:
        """The caller's jobs, newest first, a page at a time."""
        page, more = jobs.list_page(tenant, limit, after.strip())
        return models.JobPage(jobs=[_job(view) for view in page], next=more, now=now())

    @route("GET", "/jobs/<job_id>", responses=_answers(200, 404))
    def get_job(job_id: str) -> models.Job:
        """A job's state, progress and the actions it allows now."""
        return _job(jobs.status(tenant, job_id))

    @route("POST", "/jobs/<job_id>/start", status_code=202, responses=_answers(202, 400, 404, 409))
    def start_job(job_id: str) -> models.Job:
        """Start a created job once its files are uploaded."""
        logger.info("tenant %s starts job %s", tenant, job_id)
        return _job(jobs.start(tenant, job_id))

    @route("POST", "/jobs/<job_id>/cancel", status_code=202, responses=_answers(202, 404, 409))
    def cancel_job(job_id: str) -> models.Message:
        """Cancel a waiting or running job."""
        return models.Message(job_id=job_id, message=jobs.cancel(tenant, job_id))

    @route("POST", "/jobs/<job_id>/retry", status_code=202, responses=_answers(202, 404, 409))
    def retry_job(job_id: str) -> models.Message:
        """Run a failed or cancelled job again: only its segments without a valid output."""
        logger.info("tenant %s retries job %s", tenant, job_id)
        return models.Message(job_id=job_id, message=jobs.retry(tenant, job_id))

    @route("GET", "/jobs/<job_id>/detail", responses=_answers(200, 400, 404))
    def get_job_detail(
        job_id: str,
        segments_from: Annotated[int, Query(ge=0, le=10**7)] = 0,
        limit: Annotated[int, Query(ge=1, le=MAX_SEGMENT_PAGE)] = DEFAULT_SEGMENT_PAGE,
        items_from: Annotated[int, Query(ge=0, le=MAX_TARGETS)] = 0,
        items: Annotated[int, Query(ge=1, le=MAX_ITEM_PAGE)] = DEFAULT_ITEM_PAGE,
    ) -> models.BatchDetail | models.Detail:
        """A job's page: a page of its segments, its attempts, timings, cost and deliveries (a batch's: a
        page of its items)."""
        found, more = jobs.detail_page(tenant, job_id, segments_from, limit)
        shown: dict[str, Any] = {
            "job": _job(found.job), "segments": plain(found.segments), "next_segment": more,
            "attempts": plain(found.attempts), "timings": plain(found.timings), "cost": plain(found.cost),
            "deliveries": plain(found.deliveries),
            "preview": found.preview_key is not None,
            "now": now(),
        }  # fmt: skip
        page = jobs.batch_items(tenant, job_id, items_from, items)
        if page is None:
            return models.Detail.model_validate(shown)
        shown["items"], shown["next_item"] = page  # a batch: a page of its items
        return models.BatchDetail.model_validate(shown)

    @route("GET", "/jobs/<job_id>/logs", responses=_answers(200, 400, 404))
    def get_job_logs(
        job_id: str,
        segment: Annotated[int | None, Query(ge=0, description="every attempt of this segment, no paging")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_ATTEMPT_PAGE,
        after: Annotated[str, Query(alias="next", description="the cursor a page gave as `next`")] = "",
    ) -> models.Logs | models.SegmentLogs:
        """The attempts of a job's segments, in segment order, a page at a time."""
        if segment is not None:
            attempts = plain(jobs.logs(tenant, job_id, segment))
            return models.SegmentLogs.model_validate({"job_id": job_id, "attempts": attempts})
        page, more = jobs.logs_page(tenant, job_id, limit, after.strip())
        return models.Logs.model_validate({"job_id": job_id, "attempts": plain(page), "next": more})

    @route("GET", DOCUMENT_PATH, responses={200: {"description": "this document"}}, openapi_extensions=_OPEN)
    def get_openapi_document() -> dict[str, Any]:
        """The API's OpenAPI 3.1 document (docs/openapi.json); no token needed."""
        return document()

    @route("GET", "/options", responses=_answers(200, reads_farm=False))
    def get_options() -> models.OptionCatalogue:
        """The engines and FaceFusion options a job may ask for, with their choices, ranges and defaults."""
        return _catalogue(jobs.default_engine)

    @route("GET", "/jobs/<job_id>/preview", responses=_answers(200, 404))
    def get_job_preview(job_id: str) -> models.Preview:
        """The latest swapped frame; 404 before the first."""
        image = jobs.preview(tenant, job_id)
        if image is None:
            raise HttpError(404, f"job {job_id} has no preview yet")
        return models.Preview(job_id=job_id, image=image)

    return api


@cache
def document() -> dict[str, Any]:
    """The API's OpenAPI 3.1 document, generated from the routes' declarations and models."""
    # The routes are only described here, never called: no tenant's jobs behind them.
    described = tenant_api(cast(TenantJobs, None), "").app.get_openapi_schema(
        title="FusionFleet tenant API", version="1",
        description="A tenant's render jobs: create one, upload its files with presigned POSTs, start it, "
        "follow it, cancel or retry it. See docs/tenants.md.",
        security_schemes={"bearer": HTTPBearer(bearerFormat="JWT", description="the tenant's token; its "
                                               "tenant claim names the tenant")},
        security=[{"bearer": []}],
    )  # fmt: skip
    shown: dict[str, Any] = described.model_dump(mode="json", by_alias=True, exclude_none=True)
    # A parameter Powertools refuses is this API's 400 with an `Error` (fusionfleet.json_http), not its 422.
    for operation in (op for path in shown["paths"].values() for op in path.values()):
        operation["responses"].pop("422", None)
    for unused in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        shown["components"]["schemas"].pop(unused, None)
    body = models.JobRequest.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas = shown["components"]["schemas"]
    schemas.update(body.pop("$defs", {}))
    schemas["JobRequest"] = body
    return shown


def _answers(success: int, *errors: int, reads_farm: bool = True) -> dict[int, OpenAPIResponse]:
    """A route's answers for the document: its success (its return model) and its errors, each an
    `Error`; every route may be refused its token (401, 403), and one that reads the farm may find it
    not answering (502)."""
    described: dict[int, OpenAPIResponse] = {success: {"description": _SAID[success]}}
    for status in sorted({*errors, 401, 403, *([502] if reads_farm else [])}):
        described[status] = {"description": _SAID[status], "content": {JSON: {"model": models.Error}}}
    return described


@cache
def _catalogue(default_engine: str) -> models.OptionCatalogue:
    """FaceFusion's catalogue as the farm holds it (fusionfleet.facefusion.catalogue): no second list."""
    options = [
        models.OptionDescription(
            name=spec.name, kind=spec.kind, multiple=spec.multiple,
            choices=list(spec.choices) if spec.choices is not None else None,
            minimum=spec.minimum, maximum=spec.maximum, step=spec.step, max_values=spec.max_values,
            group=spec.group, help=spec.help, default=plain(DEFAULTS.get(spec.name)),
        )
        for spec in CATALOGUE.values()
    ]  # fmt: skip
    dependent = {
        name: models.ModelChoices(model_option=rule.model_option, default_model=rule.default_model,
                                  by_model={model: list(sizes) for model, sizes in rule.by_model.items()})
        for name, rule in DEPENDENT_CHOICES.items()
    }  # fmt: skip
    return models.OptionCatalogue(
        facefusion_version=FACEFUSION_VERSION, engines=list(ENGINE_NAMES), default_engine=default_engine,
        options=options, dependent_choices=dependent,
    )  # fmt: skip


def _job(view: JobView) -> models.Job:
    return models.Job.model_validate(tenant_json(view))


def respond(
    event: Mapping[str, Any], jobs: TenantJobs, tenant_claim: str = ApiEnvironment.tenant_claim,
    rules: TokenRules | None = None, clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> dict[str, Any]:  # fmt: skip
    """One event's answer: the token's own checks, its tenant, then the routes."""
    if str(event.get("rawPath") or "").rstrip("/") == DOCUMENT_PATH:  # open to all: any tenant's is the same
        return tenant_api(jobs, "", clock).resolve(event)
    claims = claims_of(event)
    problem = token_problem(claims, rules or TokenRules())
    refuse = JsonApi(headers=NO_STORE).answer
    if problem is not None:
        return refuse(HttpError(401, problem, (("WWW-Authenticate", 'Bearer error="invalid_token"'),)))
    tenant = tenant_of(claims, tenant_claim)
    if tenant is None:
        return refuse(
            HttpError(403, f"the token has no valid {tenant_claim!r} claim (lowercase letters, digits and '-')")
        )
    return tenant_api(jobs, tenant, clock).resolve(event)


def _body(api: JsonApi) -> bytes:
    """The body as sent (a body that is no UTF-8 is the service's to refuse, with the reason)."""
    event = api.app.current_event
    raw = event.body or ""
    return base64.b64decode(raw) if event.is_base64_encoded else raw.encode()
