"""`make chaos` / `python -m benchmarks.chaos`: many jobs while workers are killed, stopped and
sabotaged, and events are duplicated; then count what trusted queue systems report.

Every job must end one of two ways: exactly one correct output, or a failure notification that says
what and why. Reported (and written to benchmarks/results/chaos.json): jobs submitted, succeeded,
failed with a notification, lost (no final notification: must be 0), duplicate final outputs (must
be 0), outputs that differ from an undisturbed run of the same input (must be 0), and the time from
each fault to the affected job's final notification. Bounded in jobs and time; stops by itself.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.chaos_model import ChaosConfig
from benchmarks.chaos_run import Chaos
from benchmarks.goals import Goal, exit_status, goal_table, judge, recorded
from benchmarks.provenance import write_results
from fleetctl.local.paths import LocalPaths
from fleetctl.local.processes import UpOptions
from fleetctl.local.supervisor import LocalStack
from fusionfleet.environment.settings import FUSIONFLEET_ENGINE_BASE_TIMEOUT_SECONDS

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
GOALS = (
    Goal("lost", "==", 0, "jobs lost (no final notice)"),
    Goal("jobs_with_more_than_one_final_notice", "==", 0, "jobs with more than one final notice"),
    Goal("outputs_differing_from_undisturbed", "==", 0, "outputs differing from an undisturbed run"),
    Goal("fatal_notice_p95_s", "<", 180.0, "a poison segment's first crash → its notice, p95 (s)"),
    Goal("long_clips_succeeded_share", "==", 1.0, "long clips (the soak's) that succeeded, share"),
)


def chaos_measures(report: dict[str, Any]) -> dict[str, float | None]:
    """The goals' measures from a run's report (None: the run had no poison job, or no long clip). Pure."""
    long_clips = report.get("long_clips") or 0
    return {
        "lost": report["lost"],
        "jobs_with_more_than_one_final_notice": report["jobs_with_more_than_one_final_notice"],
        "outputs_differing_from_undisturbed": report["outputs_differing_from_undisturbed"],
        "fatal_notice_p95_s": report["fatal_fault_to_final_notification_s"]["p95"],
        "long_clips_succeeded_share": report["long_clips_succeeded"] / long_clips if long_clips else None,
    }


def table(report: dict[str, Any]) -> str:
    latency = report["fault_to_final_notification_s"]
    rows = [
        ("jobs submitted", report["jobs_submitted"], ""),
        ("succeeded", report["succeeded"], ""),
        (
            "failed with a notification",
            report["failed_with_notification"],
            f"{report['failed_as_expected']} as planned (bad inputs, poison segments)",
        ),
        ("lost", report["lost"], "must be 0"),
        ("still running when the run ended", report["still_running_at_the_end"], "not lost; the run's time was up"),
        ("duplicate final outputs", report["duplicate_final_outputs"], "must be 0"),
        ("outputs differing from undisturbed", report["outputs_differing_from_undisturbed"], "must be 0 (streams)"),
        ("  byte-identical output files", report["outputs_byte_identical_files"], f"of {report['succeeded']}"),
        ("faults injected", report["faults_total"], json.dumps(report["faults"])),
        ("  of which hit work", report.get("faults_that_hit_work"), "the rest hit idle workers or ended jobs"),
        (
            "fault → final notification (s)",
            f"{latency['min']} / {latency['median']} / {latency.get('p95')} / {latency['max']}",
            "min / median / p95 / max",
        ),
        (
            "  for jobs that failed (s)",
            "{min} / {median} / {p95} / {max}".format(**report["fault_to_final_notification_of_failed_jobs_s"]),
            "any fault that hit them, kills before the fatal one included",
        ),
        (
            "  from the fatal fault (s)",
            "{min} / {median} / {p95} / {max}".format(**report["fatal_fault_to_final_notification_s"]),
            "a poison segment's first crash; goal: p95 < 180",
        ),
        (
            "segments rendered more than once",
            report["segments_rendered_more_than_once"],
            f"of {report['segment_renders_total']} renders (same bytes by design)",
        ),
        (
            "backlog: segments waiting for (s)",
            report["backlog"]["render_queues_had_waiting_segments_for_s"],
            f"peak {report['backlog']['max_waiting_segments']} waiting",
        ),
        ("LocalStack threads, peak", report["localstack_threads"]["peak"], ""),
        ("wall time (s)", report["wall_s"], f"plus {report['references_s']} s of undisturbed reference runs"),
    ]
    return "\n".join(f"{name:<36} {value!s:<16} {note}" for name, value, note in rows)


# `make soak`: at least 40 jobs, six 3-minute clips on the classic engine at 640×360 first (about
# 27,000 frames, a backlog of well over 15 minutes for two workers), short clips on copy and classic,
# mixed priorities, three jobs with a poison segment (crashes on every attempt: the job must fail, and
# be told, soon after the first crash), faults every 5–15 s for up to 30 minutes, then up to 45 minutes
# for open jobs to end.
SOAK = ChaosConfig(
    jobs=42, bad_jobs=4, seconds=(8.0, 16.0, 30.0), fault_interval_s=(5.0, 15.0), time_limit_s=1800.0, seed=5,
    long_jobs=6, long_seconds=180.0, classic_share=0.3, size=(640, 360), drain_s=2700.0, poison_jobs=3,
)  # fmt: skip


def run_chaos(paths: LocalPaths, options: UpOptions, media: Path, config: ChaosConfig) -> dict[str, Any]:
    assert options.faults_file is not None
    stack = LocalStack(paths, say=lambda _line: None)
    return Chaos(stack, options, options.faults_file, media, config).run()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=24)
    parser.add_argument("--bad-jobs", type=int, default=4)
    parser.add_argument("--time-limit", type=float, default=900.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--poison-jobs", type=int, default=0, help="good jobs with a segment that always crashes")
    parser.add_argument("--port", type=int, default=4598)
    parser.add_argument(
        "--soak", action="store_true",
        help="the soak run: 40 jobs, four 3-minute clips and more, a backlog of over 15 minutes (make soak)",
    )  # fmt: skip
    args = parser.parse_args()
    state_dir = ROOT / ".fusionfleet" / "chaos"
    media = ROOT / ".fusionfleet" / "chaos-media"
    media.mkdir(parents=True, exist_ok=True)
    faults_file = state_dir / "faults.json"
    state_dir.mkdir(parents=True, exist_ok=True)
    faults_file.write_text("[]")
    # A short hold so a killed worker's segment returns in seconds; engine limits stay generous.
    os.environ.setdefault(FUSIONFLEET_ENGINE_BASE_TIMEOUT_SECONDS, "30")
    options = UpOptions(workers=2, port=args.port, stack="fusionfleet-chaos", default_engine="copy",
                        visibility_s=15, faults_file=faults_file)  # fmt: skip
    paths = LocalPaths.discover(state_dir, env=os.environ)
    stack = LocalStack(paths, say=lambda line: print(f"  {line}"))
    config = ChaosConfig(jobs=args.jobs, bad_jobs=args.bad_jobs, time_limit_s=args.time_limit, seed=args.seed,
                         poison_jobs=args.poison_jobs)  # fmt: skip
    result_name = "chaos.json"
    if args.soak:
        config = SOAK
        result_name = "soak.json"
    try:
        stack.up(options)
        report = run_chaos(paths, options, media, config)
    finally:
        stack.down()
    verdicts = judge(GOALS, chaos_measures(report))
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_results(result_name, {**report, **recorded(verdicts)}, {**vars(args), "chaos": asdict(config)})
    print()
    print(table(report))
    for problem in report["problems"]:
        print(f"  ! {problem}")
    print("\n" + goal_table(verdicts))
    print(f"\nwritten to {RESULTS / result_name}")
    return exit_status(verdicts)


if __name__ == "__main__":
    raise SystemExit(main())
