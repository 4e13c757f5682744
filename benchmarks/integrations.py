"""`python -m benchmarks.integrations` (`make bench-integrations`): issue 34's goals on a local stack of its own.

Four scenarios, each judged by what an outsider sees, not by the farm's own bookkeeping:
- webhooks: five jobs (three succeed, one is cancelled, one fails), each with its own receiver that
  answers 500 to its first two requests; every request is verified with the Standard Webhooks library
  (`standardwebhooks` from PyPI) and the tenant's secret; goals: exactly one final event per job,
  every signature valid, events in order (sequence 1, 2, … and webhook-timestamps never going back);
- one job at a time: a tenant limited to one running job submits three; goals: all three succeed, the
  third reads WAITING meanwhile, never two at once, each starting within one watchdog sweep of the one
  before ending (from Step Functions' own start and stop times);
- a budget of a few cents ($36 a GPU-hour here, so a cent is a second of worker time) on one render
  worker, then on two: goals: one notice naming the budget, and the tenant's spend stops within one
  segment attempt's cost of the cap per worker in flight (spend from the attempt records themselves);
  the held job resumes and ends frame-exact once the budget is raised;
- true cost: a job with a killed attempt and a straggler's backup copy; goal: `fusionfleet status`'
  cost equals the sum over its attempt records of worker time × price, and so does the tenant's ledger;
  the notice's cost (as of the merge) is never over it.

Writes benchmarks/results/integrations.json (with provenance), prints a table, exits 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from benchmarks.goals import Goal, conclude, judge, recorded
from benchmarks.pipeline import Bench
from benchmarks.provenance import write_results
from fleetctl.local.paths import LocalPaths
from fleetctl.local.processes import UpOptions
from fleetctl.local.supervisor import LocalStack
from fleetctl.samples import grace_hopper_path, write_video
from fleetctl.stack import StackResources
from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.adapters.orchestrator import execution_arn
from fusionfleet.environment.settings import FUSIONFLEET_LOCAL_DIR
from fusionfleet.jobs.attempts import read_attempts
from fusionfleet.messages import SegmentAttempt
from tests.support.media import decode_all
from tests.support.webhook_receiver import WebhookReceiver

ROOT = Path(__file__).resolve().parents[1]
STATE = ROOT / ".fusionfleet" / "bench-integrations"
PRICE = 36.0  # dollars per GPU-hour: a cent a second, so a few cents is a few segments
SWEEP_S = 10.0
FINALS = ("job.succeeded", "job.failed", "job.cancelled")
CAP_USD = 0.05  # the budget scenarios' cap: 5 s of worker time at PRICE


def _budget_goals(key: str, workers: int) -> tuple[Goal, ...]:
    where = f"{workers} worker{'s' if workers > 1 else ''}"
    return (
        Goal(f"{key}_notices", "==", 1, f"budget ({where}): notices naming the budget"),
        Goal(f"{key}_reached_cap", "==", 1, f"budget ({where}): spend reached the cap (1 = yes)"),
        Goal(f"{key}_over_allowance_usd", "<=", 0.0, f"budget ({where}): overshoot − allowance ($)"),
        Goal(f"{key}_other_notices_while_held", "==", 0, f"budget ({where}): other notices while held"),
        Goal(f"{key}_resumed_frame_exact", "==", 1, f"budget ({where}): resumed, frame-exact (1 = yes)"),
    )


GOALS = (
    Goal("webhook_jobs_without_one_final_event", "==", 0, "webhooks: jobs without exactly one final event"),
    Goal("webhook_invalid_signatures", "==", 0, "webhooks: requests failing signature verification"),
    Goal("webhook_jobs_out_of_order", "==", 0, "webhooks: jobs whose events came out of order"),
    Goal("webhook_retries_changed", "==", 0, "webhooks: retries with another id or body"),
    Goal("solo_unsuccessful_jobs", "==", 0, "one at a time: jobs that did not succeed"),
    Goal("solo_min_start_after_end_s", ">=", 0.0, "one at a time: next start − previous end, min (s)"),
    Goal("solo_max_start_after_end_s", "<=", SWEEP_S, "one at a time: next start − previous end, max (s)"),
    Goal("solo_third_seen_waiting", "==", 1, "one at a time: the third read WAITING (1 = yes)"),
    *_budget_goals("budget_one", 1),
    *_budget_goals("budget_two", 2),
    Goal("cost_status_error_usd", "<=", 2e-6, "true cost: |status − Σ records| ($)"),
    Goal("cost_ledger_error_usd", "<=", 1e-5, "true cost: |ledger − Σ records| ($)"),
    Goal("cost_killed_attempts", ">=", 1, "true cost: killed attempts in the job"),
    Goal("cost_backup_copies", ">=", 1, "true cost: backup copies in the job"),
    Goal("cost_job_succeeded", "==", 1, "true cost: the job succeeded (1 = yes)"),
    Goal("cost_notice_over_bill_usd", "<=", 0.0, "true cost: the notice's cost − Σ records ($)"),
)


def measures(report: dict[str, Any]) -> dict[str, float | None]:
    """Each goal's measure from the scenarios that ran (a scenario that did not run measures nothing)."""
    found: dict[str, float | None] = {}
    hooks = report.get("webhooks")
    if hooks:
        jobs = list(hooks["jobs"].values())
        found["webhook_jobs_without_one_final_event"] = sum(j["final_events"] != 1 for j in jobs)
        found["webhook_invalid_signatures"] = sum(j["requests"] - j["signatures_valid"] for j in jobs)
        found["webhook_jobs_out_of_order"] = sum(not (j["in_sequence"] and j["timestamps_never_back"]) for j in jobs)
        found["webhook_retries_changed"] = sum(not j["same_id_and_body_on_retries"] for j in jobs)
    solo = report.get("one_at_a_time")
    if solo:
        gaps = solo["start_after_previous_end_s"]
        found["solo_unsuccessful_jobs"] = sum(status != "succeeded" for status in solo["statuses"])
        found["solo_min_start_after_end_s"] = min(gaps) if gaps else None
        found["solo_max_start_after_end_s"] = max(gaps) if gaps else None
        found["solo_third_seen_waiting"] = float(solo["third_waited"])
    for key, name in (("budget_one", "budget_one_worker"), ("budget_two", "budget_two_workers")):
        held = report.get(name)
        if held:
            found[f"{key}_notices"] = held["budget_notices"]
            found[f"{key}_reached_cap"] = float(held["overshoot_usd"] >= 0)
            found[f"{key}_over_allowance_usd"] = round(held["overshoot_usd"] - held["allowance_usd"], 6)
            found[f"{key}_other_notices_while_held"] = len(held["other_notices_while_held"])
            found[f"{key}_resumed_frame_exact"] = float(held["resumed"] == "succeeded" and held["frames_exact"])
    cost = report.get("true_cost")
    if cost:
        found["cost_status_error_usd"] = round(abs(cost["status_cost_usd"] - cost["sum_of_attempt_records_usd"]), 7)
        found["cost_ledger_error_usd"] = round(abs(cost["tenant_ledger_usd"] - cost["sum_of_attempt_records_usd"]), 7)
        found["cost_killed_attempts"] = cost["killed"]
        found["cost_backup_copies"] = cost["backup_copies"]
        found["cost_job_succeeded"] = float(cost["status"] == "succeeded" and cost["frames_exact"])
        notice = cost["notice_cost_usd"]
        found["cost_notice_over_bill_usd"] = (
            None if notice is None else round(notice - cost["sum_of_attempt_records_usd"], 6)
        )
    return found


def options(port: int, workers: int) -> UpOptions:
    return UpOptions(
        workers=workers, port=port, stack="fusionfleet-integrations", default_engine="copy", visibility_s=15,
        watchdog_every_s=SWEEP_S, gpu_hourly_price=PRICE, faults_file=STATE / "faults.json",
        backups=True, backup_factor=2.0, backup_min_age_s=6.0,
    )  # fmt: skip


class Farm:
    def __init__(self, port: int) -> None:
        self.port = port
        self.stack = LocalStack(LocalPaths.discover(STATE, env=os.environ), say=lambda _line: None)
        self.bench: Bench | None = None

    def up(self, workers: int) -> Bench:
        state = self.stack.up(options(self.port, workers))
        self.bench = Bench(
            self.stack, StackResources.from_outputs(state.outputs), AwsTarget(state.region, state.endpoint)
        )
        return self.bench

    def cli(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "fleetctl.cli", *args], env={**os.environ, FUSIONFLEET_LOCAL_DIR: str(STATE)},
            cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"fusionfleet {' '.join(args)} failed: {done.stderr}")
        return done.stdout

    def submit(self, clip: Path, tenant: str, name: str, *extra: str) -> str:
        out = self.cli(
            "submit", "--tenant", tenant, "--source", str(grace_hopper_path()), "--target", str(clip),
            "--engine", "copy", "--name", name, *extra,
        )  # fmt: skip
        return out.strip().splitlines()[-1]

    def faults(self, rules: list[dict[str, Any]]) -> None:
        (STATE / "faults.json").write_text(json.dumps(rules))

    def attempts(self, job: str) -> list[SegmentAttempt]:
        assert self.bench is not None
        return read_attempts(self.bench.storage, self.bench.resources.work_bucket, job)

    @staticmethod
    def frames_in(path: Path) -> int:
        return len(decode_all(path)[1])

    def frames(self, notice: dict[str, Any], name: str) -> int:
        assert self.bench is not None
        path = STATE / "outputs" / f"{name}.mp4"
        path.parent.mkdir(parents=True, exist_ok=True)
        output = notice["output"]
        self.bench.aws.client("s3").download_file(output["bucket"], output["key"], str(path))
        return len(decode_all(path)[1])


def wait_until(check: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(1)
    return check()


def attempt_usd(attempt: SegmentAttempt) -> float:
    """From the record alone: worker time (to its end, or its last sign of life) × its price."""
    return ((attempt.finished_at or attempt.alive_at) - attempt.started_at) * attempt.hourly_price / 3600


# ---------------------------------------------------------------- webhooks


def webhooks(farm: Farm, clip: Path) -> dict[str, Any]:
    secret = farm.cli("local", "webhook-secret", "--tenant", "hooks").strip()
    judge = Webhook(secret)
    farm.faults([
        {"job": "hook-cancel", "segment": 0, "action": "slow", "at_frame": 5, "seconds": 60},
        {"job": "hook-fail", "segment": 1, "action": "fail"},
    ])  # fmt: skip
    assert farm.bench is not None
    inbox = farm.bench.subscribe()
    receivers, jobs = {}, {}
    for name in ("hook-ok-1", "hook-ok-2", "hook-ok-3", "hook-cancel", "hook-fail"):
        receivers[name] = WebhookReceiver(fail_first=2)
        url = receivers[name].start()
        jobs[name] = farm.submit(clip, "hooks", name, "--webhook", url, "--metadata", json.dumps({"take": name}))
    time.sleep(8)
    farm.cli("cancel", jobs["hook-cancel"])
    per_job = {}
    try:
        for name, job in jobs.items():
            notice = farm.bench.wait_for_notice(inbox, job, 600)
            receiver = receivers[name]

            def final_arrived(receiver: WebhookReceiver = receiver) -> bool:
                return any(x.payload()["type"] in FINALS for x in receiver.delivered())

            got = wait_until(final_arrived, 300)
            time.sleep(3)
            requests = receivers[name].snapshot()
            delivered = receivers[name].delivered()
            valid = 0
            for request in requests:
                try:
                    judge.verify(request.body, request.headers)
                    valid += 1
                except WebhookVerificationError:
                    pass
            payloads = [item.payload() for item in delivered]
            first = [item for item in requests if item.webhook_id == requests[0].webhook_id] if requests else []
            per_job[name] = {
                "job_id": job, "notice": notice["status"], "final_arrived": got, "requests": len(requests),
                "events_delivered": [p["type"] for p in payloads],
                "final_events": sum(p["type"] in FINALS for p in payloads),
                "signatures_valid": valid,
                "in_sequence": [p["data"]["sequence"] for p in payloads] == list(range(1, len(payloads) + 1)),
                "timestamps_never_back": [d.timestamp for d in delivered] == sorted(d.timestamp for d in delivered),
                "first_event_answers": [item.answered for item in first],
                "first_event_retry_gaps_s": [round(b.at - a.at, 1) for a, b in itertools.pairwise(first)],
                "same_id_and_body_on_retries": len({(i.webhook_id, i.body) for i in first}) == 1,
                "metadata_echoed": all(p["data"]["metadata"] == {"take": name} for p in payloads),
            }  # fmt: skip
    finally:
        for receiver in receivers.values():
            receiver.stop()
        farm.faults([])
    met = all(
        j["final_events"] == 1 and j["signatures_valid"] == j["requests"] and j["in_sequence"]
        and j["timestamps_never_back"] and j["same_id_and_body_on_retries"]
        for j in per_job.values()
    )  # fmt: skip
    return {"jobs": per_job, "goal": "one final event per job, every signature valid, events in order", "met": met}


# ---------------------------------------------------------------- one job at a time


def one_at_a_time(farm: Farm, clip: Path) -> dict[str, Any]:
    assert farm.bench is not None
    farm.cli("tenant", "set", "solo", "--max-running-jobs", "1")
    inbox = farm.bench.subscribe()
    jobs = [farm.submit(clip, "solo", f"solo-{n}") for n in range(3)]
    # The third waits behind the first two (once the slicer has seen it): `status` says so.
    waiting_seen = wait_until(lambda: "WAITING" in farm.cli("status", jobs[2]), 60)
    notices = [farm.bench.wait_for_notice(inbox, job, 900) for job in jobs]
    frames = [farm.frames(notice, f"solo-{n}") for n, notice in enumerate(notices)]
    sfn = farm.bench.aws.client("stepfunctions")
    runs = [sfn.describe_execution(executionArn=execution_arn(farm.bench.resources.state_machine_arn, j)) for j in jobs]
    gaps = [round((b["startDate"] - a["stopDate"]).total_seconds(), 2) for a, b in itertools.pairwise(runs)]
    met = all(n["status"] == "succeeded" for n in notices) and all(0 <= gap <= SWEEP_S for gap in gaps)
    return {
        "jobs": jobs, "statuses": [n["status"] for n in notices], "frames": frames, "third_waited": waiting_seen,
        "start_after_previous_end_s": gaps, "sweep_s": SWEEP_S,
        "goal": "all succeed, one at a time, each within one sweep of the previous end", "met": met,
    }  # fmt: skip


# ---------------------------------------------------------------- budget


def budget(farm: Farm, clip: Path, tenant: str, workers: int, cap: float) -> dict[str, Any]:
    assert farm.bench is not None
    farm.up(workers)
    farm.cli("tenant", "set", tenant, "--monthly-budget-usd", str(cap), "--on-budget", "stop")
    inbox = farm.bench.subscribe()
    began = time.monotonic()
    job = farm.submit(clip, tenant, f"{tenant}-long")
    sqs = farm.bench.aws.client("sqs")
    told: list[dict[str, Any]] = []
    others: list[str] = []  # the job's other notices meanwhile: none, it is held, not ended

    def read(seconds: float, until_told: bool) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not (until_told and told):
            answer = sqs.receive_message(QueueUrl=inbox, WaitTimeSeconds=5, MaxNumberOfMessages=10)
            for message in answer.get("Messages", []):
                sqs.delete_message(QueueUrl=inbox, ReceiptHandle=message["ReceiptHandle"])
                notice = json.loads(json.loads(message["Body"])["Message"])
                if notice.get("status") == "budget" and notice.get("tenant") == tenant:
                    told.append(notice)
                elif notice.get("job_id") == job:
                    others.append(str(notice.get("status")))

    read(600, until_told=True)
    held = wait_until(lambda: "WAITING" in farm.cli("status", job), 120)
    time.sleep(15)  # the last interrupted attempt ends and writes its ledger entry
    attempts = farm.attempts(job)
    costs = sorted(attempt_usd(a) for a in attempts)
    spent_records = sum(costs)
    shown = json.loads(farm.cli("tenant", "show", tenant, "--json"))
    read(30, until_told=False)  # nobody tells the tenant twice, and the held job sends no final notice
    farm.cli("tenant", "set", tenant, "--monthly-budget-usd", "100")
    final = farm.bench.wait_for_notice(inbox, job, 900)
    frames = farm.frames(final, f"{tenant}-long") if final["status"] == "succeeded" else 0
    overshoot = spent_records - cap
    allowance = sum(costs[-workers:])  # one segment attempt per worker in flight
    met = (
        len(told) == 1 and not others and held and 0 <= overshoot <= allowance and final["status"] == "succeeded"
        and frames == farm.frames_in(clip)
    )  # fmt: skip
    return {
        "tenant": tenant, "render_workers": workers, "cap_usd": cap, "price_per_gpu_hour": PRICE, "job_id": job,
        "budget_notices": len(told), "other_notices_while_held": others,
        "notice_reason": told[0]["reason"] if told else "",
        "held": held, "spent_usd_from_attempts": round(spent_records, 6), "ledger_spent_usd": shown["spent_usd"],
        "overshoot_usd": round(overshoot, 6), "largest_attempt_usd": round(costs[-1], 6) if costs else 0.0,
        "allowance_usd": round(allowance, 6), "attempts_before_hold": len(attempts),
        "resumed": final["status"], "frames": frames, "frames_expected": farm.frames_in(clip),
        "frames_exact": frames == farm.frames_in(clip), "seconds_to_notice": round(time.monotonic() - began, 1),
        "goal": "one notice naming the budget; spend stops within one segment's cost of the cap per worker",
        "met": met,
    }  # fmt: skip


# ---------------------------------------------------------------- true cost


def true_cost(farm: Farm, clip: Path) -> dict[str, Any]:
    assert farm.bench is not None
    farm.up(2)
    farm.faults([
        {"job": "priced", "segment": 0, "attempt": 1, "copy": 0, "action": "slow", "at_frame": 10, "seconds": 14},
        {"job": "priced", "segment": 0, "attempt": 1, "copy": 0, "action": "kill-worker", "at_frame": 20},
        {"job": "priced", "segment": 1, "copy": 0, "action": "slow", "at_frame": 60, "seconds": 100},
    ])  # fmt: skip
    inbox = farm.bench.subscribe()
    try:
        job = farm.submit(clip, "costs", "priced")
        wait_until(lambda: any(not a.finished_at for a in farm.attempts(job) if a.index == 0), 120)
        time.sleep(20)  # the worker dies at frame 20, after the 14 s stall
        farm.up(2)  # the dead worker is replaced, as ECS would
        notice = farm.bench.wait_for_notice(inbox, job, 900)
        now_settled = lambda: all(a.finished_at or time.time() - a.alive_at > 35 for a in farm.attempts(job))  # noqa: E731
        wait_until(now_settled, 180)
        attempts = farm.attempts(job)
        expected = sum(attempt_usd(a) for a in attempts)
        line = next(x for x in farm.cli("status", job).splitlines() if x.startswith("cost"))
        shown = float(line.split("$", 1)[1].split()[0].rstrip(":"))
        ledger = 0.0
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            ledger = json.loads(farm.cli("tenant", "show", "costs", "--json"))["spent_usd"]
            if abs(ledger - expected) <= len(attempts) * 1e-6:
                break
            time.sleep(3)
    finally:
        farm.faults([])
    frames = farm.frames(notice, "priced")
    kinds = {
        "killed": sum(not a.finished_at for a in attempts),
        "backup_copies": sum(a.copy_number > 0 for a in attempts),
        "superseded": sum(a.status == "superseded" for a in attempts),
    }
    met = (
        notice["status"] == "succeeded" and kinds["killed"] >= 1 and kinds["backup_copies"] >= 1
        and abs(shown - expected) <= 2e-6 and abs(ledger - expected) <= len(attempts) * 1e-6
    )  # fmt: skip
    return {
        "job_id": job, "status": notice["status"], "frames": frames, "frames_expected": farm.frames_in(clip),
        "frames_exact": frames == farm.frames_in(clip), "attempts": len(attempts),
        **kinds, "status_cost_usd": shown, "sum_of_attempt_records_usd": round(expected, 6),
        "tenant_ledger_usd": ledger, "notice_cost_usd": notice.get("cost", {}).get("estimated_usd"),
        "goal": "status and ledger = sum of every attempt's worker time x price", "met": met,
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=4597)
    args = parser.parse_args()
    STATE.mkdir(parents=True, exist_ok=True)
    (STATE / "faults.json").write_text("[]")
    media = STATE / "media"
    media.mkdir(exist_ok=True)
    short, long, two = media / "short.mp4", media / "long.mp4", media / "two.mp4"
    for path, seconds in ((short, 12), (long, 48), (two, 10)):
        if not path.exists():
            write_video(path, seconds=seconds, fps=25, width=320, height=240)
    farm = Farm(args.port)
    report: dict[str, Any] = {"benchmark": "integrations"}
    try:
        farm.up(2)
        report["webhooks"] = webhooks(farm, short)
        report["one_at_a_time"] = one_at_a_time(farm, short)
        report["budget_one_worker"] = budget(farm, long, "tight-one", 1, CAP_USD)
        report["budget_two_workers"] = budget(farm, long, "tight-two", 2, CAP_USD)
        report["true_cost"] = true_cost(farm, two)
    finally:
        farm.stack.down()
        verdicts = judge(GOALS, measures(report))
        report.update(recorded(verdicts))
        path = write_results(
            "integrations.json", report, {**vars(args), "price_per_gpu_hour": PRICE, "sweep_s": SWEEP_S}
        )
        print(f"results: {path}")
    summary(report)
    return conclude(verdicts)


def summary(report: dict[str, Any]) -> None:
    """The scenarios' figures in a few lines (the goals' table follows)."""
    for name, job in report["webhooks"]["jobs"].items():
        print(f"webhooks {name}: {job['final_events']} final, {job['signatures_valid']}/{job['requests']} valid, "
              f"answers {job['first_event_answers']} after {job['first_event_retry_gaps_s']} s")  # fmt: skip
    solo = report["one_at_a_time"]
    print(f"one at a time: {solo['statuses']}, starts after previous end {solo['start_after_previous_end_s']} s")
    for key in ("budget_one_worker", "budget_two_workers"):
        b = report[key]
        print(f"{key}: cap ${b['cap_usd']}, spent ${b['spent_usd_from_attempts']} (over by ${b['overshoot_usd']}, "
              f"allowance ${b['allowance_usd']}), {b['budget_notices']} notice, resumed {b['resumed']} with "
              f"{b['frames']}/{b['frames_expected']} frames")  # fmt: skip
    cost = report["true_cost"]
    print(f"true cost: status ${cost['status_cost_usd']}, records ${cost['sum_of_attempt_records_usd']}, ledger "
          f"${cost['tenant_ledger_usd']} ({cost['attempts']} attempts: {cost['killed']} killed, "
          f"{cost['backup_copies']} backup)")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
