"""Benchmarks' goals (benchmarks/goals.py): judged, recorded, printed, and an exit status that fails."""

from __future__ import annotations

from benchmarks.goals import Goal, all_met, exit_status, goal_table, judge, recorded

GOALS = (
    Goal("p95_s", "<", 180.0, "fault → notice, p95"),
    Goal("lost", "==", 0, "jobs lost"),
    Goal("efficiency", ">=", 0.9, "efficiency at 64"),
)


def test_each_goal_is_judged_against_its_measure() -> None:
    verdicts = judge(GOALS, {"p95_s": 29.0, "lost": 0, "efficiency": 0.84})
    assert [verdict.met for verdict in verdicts] == [True, True, False]
    assert not all_met(verdicts) and exit_status(verdicts) == 1
    record = recorded(verdicts)
    assert record["goals_met"] is False
    assert record["goals"]["efficiency"] == {"what": "efficiency at 64", "goal": ">= 0.9", "value": 0.84, "met": False}
    assert "MISSED" in goal_table(verdicts) and "goals met: NO" in goal_table(verdicts)


def test_a_goal_not_measured_misses_nothing_but_a_run_that_measured_none_fails() -> None:
    partly = judge(GOALS, {"p95_s": 29.0, "lost": 0})
    assert partly[2].met is None and exit_status(partly) == 0
    assert "not measured" in goal_table(partly)
    assert exit_status(judge(GOALS, {})) == 1
    assert judge(GOALS, {"p95_s": float("nan")})[0].met is None
