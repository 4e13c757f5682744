"""The JSON-over-HTTP layer both APIs share: routes by method and pattern, errors as JSON, compact bodies."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from fusionfleet.json_http import (
    HttpError,
    Router,
    json_bytes,
    method_not_allowed,
    not_found,
    plain,
    query_value,
    whole_number,
)

JOBS = [
    ("GET", "jobs", "list"),
    ("POST", "jobs", "create"),
    ("GET", "jobs/{job_id}", "status"),
    ("POST", "jobs/{job_id}/cancel", "cancel"),
]


def test_a_path_names_the_route_of_each_method_and_its_parameters() -> None:
    router = Router("/api", JOBS)
    found = router.match("/api/jobs/j-1/cancel")
    assert found is not None and dict(found.names) == {"POST": "cancel"} and found.params == {"job_id": "j-1"}
    listed = router.match("/api/jobs")
    assert listed is not None and listed.methods == frozenset({"GET", "POST"}) and listed.names["POST"] == "create"


@pytest.mark.parametrize(
    "path", ["/jobs", "/api", "/api/", "/api/jobs/j-1/retry", "/api/jobs/j-1/cancel/x", "api/jobs"]
)
def test_a_path_outside_the_prefix_or_fitting_no_pattern_names_nothing(path: str) -> None:
    assert Router("/api", JOBS).match(path) is None


def test_a_trailing_slash_names_the_same_resource_only_where_the_router_says_so() -> None:
    strict, lenient = Router("/", JOBS), Router("/", JOBS, trailing_slash=True)
    # A strict router reads `/jobs/` as a job with an empty id (for its API to refuse), a lenient one as `/jobs`.
    strict_found = strict.match("/jobs/")
    assert strict_found is not None and strict_found.params == {"job_id": ""}
    lenient_found = lenient.match("/jobs/")
    assert lenient_found is not None and lenient_found.methods == frozenset({"GET", "POST"})
    assert lenient.match("/") is None and strict.match("/") is None


def test_parameters_are_handed_over_as_they_appear_in_the_path() -> None:
    found = Router("/api", JOBS).match("/api/jobs/..%2Fetc")
    assert found is not None and found.params == {"job_id": "..%2Fetc"}  # the API decides what to unquote


def test_errors_are_json_with_a_status_and_any_fields_and_headers_beside_the_message() -> None:
    bad = HttpError(400, "the job is invalid", problems=["no target"])
    assert (bad.status, bad.body(), bad.headers) == (
        400,
        {"error": "the job is invalid", "problems": ["no target"]},
        (),
    )
    assert not_found("/x" * 200).body() == {"error": "no such resource: " + ("/x" * 100)}
    named = method_not_allowed("DELETE", frozenset({"POST", "GET"}))
    assert (named.status, named.message, named.headers) == (
        405, "DELETE is not allowed here (allowed: GET, POST)", (("Allow", "GET, POST"),),
    )  # fmt: skip
    assert method_not_allowed("PUT", frozenset({"GET"}), name_allowed=False).message == "PUT is not allowed here"


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
