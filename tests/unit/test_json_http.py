"""The JSON-over-HTTP layer both APIs share: Powertools' dispatch, one error mapping, one job-id check, JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from fusionfleet.errors import FusionFleetError, JobNotFound, OperationRefused
from fusionfleet.json_http import JSON, HttpError, JsonApi, http_event, json_bytes, plain, query_value, whole_number
from fusionfleet.services.tenant_jobs import BadBody


def answer(
    api: JsonApi, method: str, target: str, body: bytes = b"", **headers: str
) -> tuple[int, Any, dict[str, str]]:
    result = api.resolve(http_event(method, target, headers, body))
    return int(result["statusCode"]), json.loads(result["body"]), dict(result["headers"])


def jobs_api(**options: Any) -> tuple[JsonApi, list[tuple[str, ...]]]:
    """An API of four routes whose job routes raise what the job id names; every call is recorded."""
    api, calls = JsonApi("/api", **options), list[tuple[str, ...]]()
    failures: dict[str, Exception] = {
        "gone": JobNotFound("no job record for the pipeline's internal id"),
        "ended": OperationRefused("job ended is SUCCEEDED: it has ended, nothing to cancel"),
        "bad": BadBody(("no target", "unknown option 'x'")),
        "down": FusionFleetError("the work bucket refused the read"),
        "broken": ConnectionError("Could not connect to the endpoint URL"),
    }

    @api.route("GET", "/jobs")
    def listed() -> dict[str, Any]:
        calls.append(("list",))
        return {"jobs": [], "at": datetime(2026, 12, 5, 9, tzinfo=UTC)}

    @api.route("POST", "/jobs")
    def create() -> tuple[dict[str, Any], int]:
        calls.append(("create",))
        return {"job_id": "j-1"}, 201

    @api.route("GET", "/jobs/<job_id>")
    def status(job_id: str) -> dict[str, Any]:
        calls.append(("status", job_id))
        if job_id in failures:
            raise failures[job_id]
        return {"job_id": job_id}

    @api.route("POST", "/jobs/<job_id>/cancel")
    def cancel(job_id: str) -> dict[str, Any]:
        calls.append(("cancel", job_id))
        raise failures.get(job_id) or HttpError(418, "teapot", (("X-Why", "test"),), hint="x")

    return api, calls


def test_routes_answer_compact_json_with_their_status_and_unquoted_parameters() -> None:
    api, calls = jobs_api(headers={"Cache-Control": "no-store"})
    assert answer(api, "GET", "/api/jobs")[:2] == (200, {"jobs": [], "at": "2026-12-05T09:00:00+00:00"})
    assert answer(api, "POST", "/api/jobs")[0] == 201
    status, body, headers = answer(api, "GET", "/api/jobs/j%2E1")
    assert (status, body) == (200, {"job_id": "j.1"}) and headers["Cache-Control"] == "no-store"
    assert calls == [("list",), ("create",), ("status", "j.1")]


@pytest.mark.parametrize(
    ("method", "path", "status", "message"),
    [
        ("GET", "/api/nothing", 404, "no such resource: /api/nothing"),
        ("GET", "/jobs", 404, "no such resource: /jobs"),
        ("DELETE", "/api/jobs", 405, "DELETE is not allowed here (allowed: GET, POST)"),
        ("GET", "/api/jobs/j-1/cancel", 405, "GET is not allowed here (allowed: POST)"),
        # a path that would name a job's resource but for its id names nothing, whatever the method
        ("GET", "/api/jobs/..%2F..%2Fetc/cancel", 404, "no such resource: /api/jobs/..%2F..%2Fetc/cancel"),
        ("GET", "/api/jobs/a%20b", 404, "no job a b"),
    ],
)
def test_a_path_that_names_nothing_is_404_and_one_asked_with_another_method_405(
    method: str, path: str, status: int, message: str
) -> None:
    api, calls = jobs_api()
    got, body, headers = answer(api, method, path)
    assert (got, body) == (status, {"error": message})
    assert headers.get("Allow") == (message.split("allowed: ")[1].rstrip(")") if status == 405 else None)
    assert calls == []


@pytest.mark.parametrize(
    ("job_id", "status", "body"),
    [
        # the id asked for, never what the domain called it (a tenant must not see the pipeline's id)
        ("gone", 404, {"error": "no job gone"}),
        ("ended", 409, {"error": "job ended is SUCCEEDED: it has ended, nothing to cancel"}),
        ("bad", 400, {"error": "the job is invalid", "problems": ["no target", "unknown option 'x'"]}),
        ("down", 502, {"error": "the work bucket refused the read"}),
        ("broken", 502, {"error": "the stack did not answer: ConnectionError"}),
    ],
)
def test_the_one_error_mapping(job_id: str, status: int, body: dict[str, Any]) -> None:
    api, _calls = jobs_api()
    assert answer(api, "GET", f"/api/jobs/{job_id}")[:2] == (status, body)


def test_an_unexpected_error_is_told_in_full_only_where_the_api_reveals_it_and_an_http_error_as_raised() -> None:
    api, _calls = jobs_api(reveal=True, json_posts=True)
    expected = {"error": "the stack did not answer: ConnectionError: Could not connect to the endpoint URL"}
    assert answer(api, "GET", "/api/jobs/broken")[:2] == (502, expected)
    status, body, headers = answer(api, "POST", "/api/jobs/j-1/cancel", b"{}", **{"Content-Type": JSON})
    assert (status, body, headers["X-Why"]) == (418, {"error": "teapot", "hint": "x"}, "test")


def test_a_post_that_is_no_json_is_refused_where_the_api_asks_for_json() -> None:
    api, calls = jobs_api(json_posts=True)
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    assert answer(api, "POST", "/api/jobs/j-1/cancel", b"x=1", **form)[:2] == (
        415, {"error": f"POST needs Content-Type: {JSON}"},
    )  # fmt: skip
    assert calls == []
    lenient, _ = jobs_api()
    assert answer(lenient, "POST", "/api/jobs", b"x=1", **form)[0] == 201


def test_a_trailing_slash_names_the_same_resource_only_where_the_api_says_so() -> None:
    strict, _ = jobs_api()
    lenient, _ = jobs_api(trailing_slash=True)
    assert answer(strict, "GET", "/api/jobs/")[0] == 404
    assert answer(lenient, "GET", "/api/jobs/")[0] == 200


def test_an_error_answered_before_any_route_carries_the_apis_headers() -> None:
    api = JsonApi(headers={"Cache-Control": "no-store"})
    refused = api.answer(HttpError(401, "bad token", (("WWW-Authenticate", "Bearer"),)))
    assert refused["statusCode"] == 401 and json.loads(refused["body"]) == {"error": "bad token"}
    assert refused["headers"] == {"Cache-Control": "no-store", "Content-Type": JSON, "WWW-Authenticate": "Bearer"}


def test_an_event_is_what_api_gateway_hands_a_lambda() -> None:
    event = http_event("POST", "/jobs?limit=3", {"X-A": "b"}, b"\xff", {"tenant": "acme", "n": 1})
    assert (event["rawPath"], event["rawQueryString"], event["headers"]) == ("/jobs", "limit=3", {"x-a": "b"})
    assert event["isBase64Encoded"] and event["body"] == "/w=="
    assert event["requestContext"]["authorizer"]["jwt"]["claims"] == {"tenant": "acme", "n": "1"}
    assert "authorizer" not in http_event("GET", "/", {}, b"")["requestContext"]


def test_query_values_are_the_last_one_given_stripped() -> None:
    assert query_value("limit=3&limit=%205%20", "limit") == "5"
    assert query_value("limit=3&limit=", "limit") == ""  # a blank last value counts …
    assert query_value("limit=3&limit=", "limit", keep_blank=False) == "3"  # … unless blanks are dropped
    assert query_value("", "limit") == ""


@pytest.mark.parametrize("raw", ["0", "201", "-1", "1.5", "ten", "x" * 100])
def test_a_number_out_of_range_is_a_400_that_says_what_it_must_be(raw: str) -> None:
    with pytest.raises(HttpError) as refused:
        whole_number(raw, "limit", 1, 200)
    assert refused.value.status == 400
    assert refused.value.message == f"limit must be a whole number from 1 to 200, not {raw[:40]!r}"


def test_a_number_in_range_is_read() -> None:
    assert whole_number("200", "limit", 1, 200) == 200


@dataclass(frozen=True)
class Record:
    at: datetime
    values: tuple[float, ...]


def test_records_become_compact_json() -> None:
    value = plain({"record": Record(datetime(2026, 12, 5, 9, tzinfo=UTC), (1.5, float("nan"))), 3: {"a"}})
    assert json_bytes(value) == b'{"record":{"at":"2026-12-05T09:00:00+00:00","values":[1.5,null]},"3":["a"]}'
    assert json.loads(json_bytes(value))["3"] == ["a"]
