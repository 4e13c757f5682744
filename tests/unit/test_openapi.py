"""The tenant API's document (docs/openapi.json) against the routes and the running API.

The document is generated from the routes' own declarations and models (functions.api.routes), so these
tests hold it to three things: the committed file is what the routes generate now; every route and
parameter the resolver serves is in it, and every route API Gateway sends to the function (template.yaml);
and every answer the running API gives, success or error, is one the document declares for that route,
its body valid against the declared schema.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate as validate_spec

from functions.api import openapi
from functions.api.claims import TokenRules
from functions.api.routes import DOCUMENT_PATH, document, respond, tenant_api
from fusionfleet import layout
from fusionfleet.errors import FusionFleetError
from fusionfleet.facefusion.catalogue import CATALOGUE, DEFAULTS
from fusionfleet.json_http import http_event, plain
from fusionfleet.services.tenant_jobs import TenantJobs
from infra.emulators.api_gateway import LocalApi
from infra.emulators.jwt_authorizer import JwtAuthorizer
from tests.support.jobs import MEDIA, WORK
from tests.support.template import load_template
from tests.unit.test_api_jobs import Farm

ROOT = Path(__file__).resolve().parents[2]
DOC = document()


def operations() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in DOC["paths"].items():
        for method, operation in item.items():
            yield method.upper(), path, operation


def operation_of(method: str, path: str) -> tuple[str, dict[str, Any]]:
    """The document's operation that serves a concrete path (`/jobs/abc/detail`)."""
    for doc_method, template, operation in operations():
        pattern = "^" + re.sub(r"\\{\w+\\}", "[^/]+", re.escape(template)) + "/?$"
        if doc_method == method and re.match(pattern, path):
            return template, operation
    raise AssertionError(f"{method} {path} is not in the document")


def check_answer(method: str, path: str, status: int, body: Any) -> tuple[str, str, int]:
    """The answer is one the document declares for its route, its body valid against the schema."""
    template, operation = operation_of(method, path)
    declared = operation["responses"]
    assert str(status) in declared, f"{method} {template} answered {status}, declared {sorted(declared)}"
    schema = declared[str(status)]["content"]["application/json"]["schema"]
    validator = Draft202012Validator({"allOf": [schema], "components": DOC["components"]})
    problems = [f"{'/'.join(map(str, error.absolute_path))}: {error.message}" for error in validator.iter_errors(body)]
    assert not problems, f"{method} {path} {status}: {problems}"
    return method, template, status


class RecordingFarm(Farm):
    """The in-memory farm whose every answer is checked against the document as it is read."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[tuple[str, str, int]] = set()

    def call(self, method: str, path: str, body: object = None, tenant: str | None = "acme", query: str = "") -> Any:
        answer = super().call(method, path, body, tenant, query)  # type: ignore[arg-type]
        self.seen.add(check_answer(method, path, answer.status, answer.body))
        return answer


class Unanswering(TenantJobs):
    """A farm whose every read and write fails as a stack that does not answer does."""

    def __getattribute__(self, name: str) -> Any:
        if name in {"create", "status", "start", "cancel", "retry", "list_page", "detail_page", "batch_items",
                    "logs", "logs_page", "preview"}:  # fmt: skip
            raise FusionFleetError("the stack did not answer")
        return super().__getattribute__(name)


def test_the_committed_document_is_the_one_the_routes_generate() -> None:
    committed = (ROOT / "docs" / "openapi.json").read_text(encoding="utf-8")
    assert committed == openapi.text(), "docs/openapi.json is stale: run .venv/bin/python -m functions.api.openapi"
    validate_spec(json.loads(committed))  # a valid OpenAPI 3.1 document


def test_every_route_and_parameter_of_the_resolver_is_in_the_document() -> None:
    app = tenant_api(Farm().jobs, "acme").app
    routes = {(route.method, route.openapi_path): route for route in app._static_routes + app._dynamic_routes}
    assert set(routes) == {(method, path) for method, path, _op in operations()}
    for (method, path), route in routes.items():
        operation = DOC["paths"][path][method.lower()]
        declared = {(p["in"], p["name"]) for p in operation.get("parameters", [])}
        served = {("query", field.alias) for field in route.dependant.query_params}
        served |= {("path", name) for name in re.findall(r"\{(\w+)\}", path)}
        assert declared == served, (method, path)


def test_api_gateway_routes_exactly_the_documents_paths_to_the_function() -> None:
    events = load_template()["Resources"]["ApiFunction"]["Properties"]["Events"]
    routed = {(event["Properties"]["Method"], event["Properties"]["Path"]) for event in events.values()}
    assert routed == {(method, path) for method, path, _op in operations()}
    (open_route,) = [event for event in events.values() if event["Properties"]["Path"] == DOCUMENT_PATH]
    assert open_route["Properties"]["Auth"] == {"Authorizer": "NONE"}
    assert DOC["paths"][DOCUMENT_PATH]["get"]["security"] == []


def test_the_document_is_served_without_a_token() -> None:
    answer = respond(http_event("GET", DOCUMENT_PATH, {}, b""), Farm().jobs)
    assert answer["statusCode"] == 200
    assert json.loads(answer["body"]) == json.loads((ROOT / "docs" / "openapi.json").read_text(encoding="utf-8"))


def test_every_answer_of_the_running_api_is_one_the_document_declares() -> None:
    # GIVEN acme's farm, every answer checked against the document as it comes
    farm = RecordingFarm()
    # WHEN acme creates, uploads, starts and follows a job through every route
    api_id, job = farm.started()
    farm.sliced(job, "RUNNING", done=1)
    farm.storage.put_bytes(WORK, layout.frame_preview_key(job), b"\xff\xd8jpeg")
    for query in ("", "limit=1", "limit=1&next=bm9wZQ"):
        farm.call("GET", "/jobs", query=query)
    for route in ("", "/detail", "/logs", "/preview"):
        farm.call("GET", f"/jobs/{api_id}{route}")
    farm.call("GET", f"/jobs/{api_id}/detail", query="segments_from=2&limit=1")
    farm.call("GET", f"/jobs/{api_id}/logs", query="segment=0")
    farm.call("GET", "/options")
    farm.call("POST", f"/jobs/{api_id}/start")  # started already: 409
    farm.call("POST", f"/jobs/{api_id}/retry")  # running: 409
    farm.call("POST", f"/jobs/{api_id}/cancel")
    farm.call("POST", f"/jobs/{api_id}/cancel")  # cancelled already: 409
    farm.call("POST", f"/jobs/{api_id}/retry")
    farm.sliced(job, "SUCCEEDED", done=4)
    farm.call("GET", f"/jobs/{api_id}")
    # AND every refusal: a bad body, bad parameters, another tenant's job, no preview yet
    farm.call("POST", "/jobs", {"source": ["face.jpg"], "target": "clip.mp4", "priority": "urgent"})
    farm.call("POST", "/jobs", {"source": ["face.jpg"], "target": "clip.mp4", "sizes": {"clip.mp4": 10**12}})
    farm.call("GET", "/jobs", query="limit=0")
    farm.call("GET", f"/jobs/{api_id}/detail", query="limit=x")
    farm.call("GET", f"/jobs/{api_id}/logs", query="segment=-1")
    created = farm.call("POST", "/jobs", {"source": ["face.jpg"], "target": "clip.mp4"}).body["job_id"]
    farm.call("POST", f"/jobs/{created}/start")  # not uploaded: 409
    farm.call("GET", f"/jobs/{created}/preview")  # no preview: 404
    farm.storage.put_bytes(MEDIA, layout.tenant_upload_key("acme", created, "face.jpg"), b"not a face")
    farm.storage.put_bytes(MEDIA, layout.tenant_upload_key("acme", created, "clip.mp4"), b"media")
    farm.call("POST", f"/jobs/{created}/start")  # a source that is no image: 400
    for method, route in [("GET", ""), ("POST", "/start"), ("POST", "/cancel"), ("POST", "/retry"),
                          ("GET", "/detail"), ("GET", "/logs")]:  # fmt: skip
        farm.call(method, f"/jobs/{api_id}{route}", tenant="globex")
    # AND the token's and the stack's refusals on every route
    rules = TokenRules(audience="fusionfleet")
    down = Unanswering(farm.storage, farm.jobs.reader, farm.jobs.operations, MEDIA, WORK)
    for method, path, _operation in operations():
        concrete = path.replace("{job_id}", api_id)
        body = json.dumps({"source": ["face.jpg"], "target": "clip.mp4"}).encode() if method == "POST" else b""
        headers = {"Content-Type": "application/json"}
        acme = {"tenant": "acme"}
        for claims, jobs, token in ((acme, farm.jobs, rules), ({}, farm.jobs, None), (acme, down, None)):
            answer = respond(http_event(method, concrete, headers, body, claims), jobs, rules=token)
            farm.seen.add(check_answer(method, concrete, answer["statusCode"], json.loads(answer["body"])))
    # THEN each answer matched (checked above), and every answer the document declares was given
    declared = {(method, path, int(status)) for method, path, op in operations() for status in op["responses"]}
    assert declared - farm.seen == set(), "declared and never answered"


@pytest.mark.parametrize(("query", "said"), [
    ("limit=0", "limit must be a whole number from 1 to 200, not '0'"),
    ("limit=many", "limit must be a whole number from 1 to 200, not 'many'"),
])  # fmt: skip
def test_a_refused_parameter_is_a_400_that_says_what_it_must_be(query: str, said: str) -> None:
    answer = Farm().call("GET", "/jobs", query=query)
    assert (answer.status, answer.body) == (400, {"error": said})


def test_the_local_gateway_serves_the_document_without_a_token_and_nothing_else() -> None:
    # GIVEN the local stand-in for API Gateway, whose authorizer would refuse any token
    jobs = Farm().jobs
    gateway = LocalApi(JwtAuthorizer(b"no key", "issuer", "audience"), lambda event, _c: respond(event, jobs))
    # THEN the document needs none, and the jobs still do
    assert gateway.respond("GET", DOCUMENT_PATH, {}, b"").status == 200
    assert gateway.respond("GET", "/jobs", {}, b"").status == 401


def test_the_options_are_the_catalogue_the_farm_checks_jobs_against() -> None:
    options = Farm().call("GET", "/options").body
    assert [option["name"] for option in options["options"]] == list(CATALOGUE)
    assert {option["name"]: option["default"] for option in options["options"]} == plain(
        {name: DEFAULTS.get(name) for name in CATALOGUE}
    )
    processors = next(option for option in options["options"] if option["name"] == "processors")
    assert processors["choices"] == list(CATALOGUE["processors"].choices or ()) and processors["multiple"]
