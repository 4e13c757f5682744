"""Goals a benchmark checks itself: it states them, judges its measures against them, records met or
not in its results file, prints them, and exits non-zero when one is missed.

    GOALS = (Goal("fatal_notice_p95_s", "<", 180.0, "a poison segment's first crash → its job's notice, p95"),)
    verdicts = judge(GOALS, {"fatal_notice_p95_s": 29.0})
    write_results("x.json", {**report, **recorded(verdicts)})
    print(goal_table(verdicts))
    return exit_status(verdicts)

A goal whose measure the run did not produce (None: a shorter run, a failed job) is recorded as not
measured; it misses nothing, and a run that measured no goal at all is a failed run.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Relation = Literal["<", "<=", ">", ">=", "=="]
_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
}  # fmt: skip


@dataclass(frozen=True)
class Goal:
    measure: str  # the key its value is found under
    relation: Relation
    target: float
    what: str = ""  # in words, for the table and the results file

    def met(self, value: float | None) -> bool | None:
        """Whether `value` meets the goal; None when it was not measured."""
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return None
        return _COMPARE[self.relation](float(value), self.target)

    @property
    def stated(self) -> str:
        return f"{self.relation} {self.target:g}"


@dataclass(frozen=True)
class Verdict:
    goal: Goal
    value: float | None
    met: bool | None  # None: not measured


def judge(goals: Sequence[Goal], measures: Mapping[str, float | None]) -> list[Verdict]:
    """Each goal against its measure. Pure."""
    return [Verdict(goal, measures.get(goal.measure), goal.met(measures.get(goal.measure))) for goal in goals]


def all_met(verdicts: Sequence[Verdict]) -> bool:
    """Every measured goal met, and at least one measured."""
    measured = [verdict for verdict in verdicts if verdict.met is not None]
    return bool(measured) and all(verdict.met for verdict in measured)


def recorded(verdicts: Sequence[Verdict]) -> dict[str, Any]:
    """What the results file keeps: each goal, its value and whether it was met; and all of them."""
    return {
        "goals": {
            verdict.goal.measure: {
                "what": verdict.goal.what, "goal": verdict.goal.stated, "value": verdict.value, "met": verdict.met,
            }
            for verdict in verdicts
        },
        "goals_met": all_met(verdicts),
    }  # fmt: skip


def goal_table(verdicts: Sequence[Verdict]) -> str:
    rows = [f"{'goal':<52} {'value':>12} {'target':>10}  result"]
    for verdict in verdicts:
        value = "-" if verdict.value is None else f"{verdict.value:g}"
        result = {True: "met", False: "MISSED", None: "not measured"}[verdict.met]
        name = verdict.goal.what or verdict.goal.measure
        rows.append(f"{name[:52]:<52} {value:>12} {verdict.goal.stated:>10}  {result}")
    rows.append(f"goals met: {'yes' if all_met(verdicts) else 'NO'}")
    return "\n".join(rows)


def exit_status(verdicts: Sequence[Verdict]) -> int:
    """0 when every measured goal was met (and one was); 1 otherwise."""
    return 0 if all_met(verdicts) else 1


def conclude(verdicts: Sequence[Verdict], written: Path | None = None) -> int:
    """A benchmark's ending: its goal table printed (and where its results were written), its exit status."""
    print("\n" + goal_table(verdicts) + (f"\nwritten to {written}" if written is not None else ""))
    return exit_status(verdicts)
