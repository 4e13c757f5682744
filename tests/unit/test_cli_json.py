"""`--json` on `status`, `list`, `logs` and `workers` (through the stack): one JSON document on stdout, in the
shapes the dashboard's API answers (`view_json`), or the tenant API's for `logs`."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from fleetctl import cli, job_commands
from fleetctl.cli import main
from fleetctl.exits import Exit
from fusionfleet.fleet.workers import WorkerView
from fusionfleet.jobs.states import JobState
from fusionfleet.jobs.views import AttemptView, JobView, SegmentCounts, view_json
from fusionfleet.json_http import plain

VIEW = JobView("clip-1", "clip", JobState.FAILED, reason="no face", priority="high", segments=SegmentCounts(4, 1, 1))
ATTEMPT = AttemptView(0, 1, "w1", "failed", 10.0, 12.5, 2.0, "EngineError", "no face")


class Reader:
    def list_jobs(self, state: object, limit: int, tenant: object) -> list[JobView]:
        return [VIEW]

    def logs(self, job_id: str, segment: int | None) -> list[AttemptView]:
        return [ATTEMPT]


@pytest.fixture(autouse=True)
def farm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(job_commands, "reader_of", lambda _args: Reader())
    monkeypatch.setattr(job_commands, "client_of", lambda _args: SimpleNamespace(status=lambda _job: VIEW))
    monkeypatch.setattr(cli, "is_batch_id", lambda _args, _job: False)
    for name in ("FUSIONFLEET_API_URL", "FUSIONFLEET_TOKEN"):
        monkeypatch.delenv(name, raising=False)


def _document(capsys: pytest.CaptureFixture[str]) -> object:
    out = capsys.readouterr().out
    return json.loads(out)  # one document: anything printed beside it would not parse


def test_status_json_is_the_dashboards_job_and_exits_as_the_job_ended(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "clip-1", "--json"]) == Exit.FAILED
    shown = _document(capsys)
    assert isinstance(shown, dict)
    assert shown["job"] == json.loads(json.dumps(view_json(VIEW)))
    assert shown["job"]["ended"] is True


def test_list_json_is_the_dashboards_listing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--json", "--limit", "5"]) == Exit.DONE
    shown = _document(capsys)
    assert isinstance(shown, dict)
    assert (shown["limit"], [job["job_id"] for job in shown["jobs"]]) == (5, ["clip-1"])
    assert shown["jobs"][0]["segments"] == {"total": 4, "done": 1, "failed": 1, "running": 0}


def test_logs_json_is_the_tenant_apis_logs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["logs", "clip-1", "--json"]) == Exit.DONE
    assert _document(capsys) == {"job_id": "clip-1", "attempts": [plain(ATTEMPT)]}


def test_workers_json_lists_each_worker(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    seen = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)
    worker = WorkerView("w1", "render", "classic", "clip-1:0", 3, seen, False)
    resources = SimpleNamespace(work_bucket="work")
    conn = SimpleNamespace(aws=SimpleNamespace(client=lambda _name: None), resources=lambda: resources)
    monkeypatch.setattr(job_commands, "connect", lambda _args: conn)
    monkeypatch.setattr(job_commands, "worker_views", lambda *_a: [worker])
    assert main(["workers", "--json"]) == Exit.DONE
    shown = _document(capsys)
    assert isinstance(shown, dict)
    assert shown["workers"] == [{**plain(worker), "last_heartbeat": seen.isoformat()}]
