"""The order `make test` hands its files out in (tests/support/scheduling.py): stack files first, longest first."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

from tests.support.scheduling import (
    E2E_SECONDS_PER_TEST,
    KNOWN_SECONDS,
    OWN_STACK_FILES,
    OWN_STACK_SECONDS,
    SECONDS_PER_TEST,
    estimate,
    is_stack_file,
    longest_first,
    measured,
)


def _units(**tests: int) -> dict[str, dict[str, bool]]:
    """Work units as xdist keeps them: a file's path → {node id: done}."""
    paths = {name: name.replace("__", "/") + ".py" for name in tests}
    return {paths[name]: {f"{paths[name]}::t{i}": False for i in range(n)} for name, n in tests.items()}


def test_stack_files_come_first_and_each_group_longest_first() -> None:
    # GIVEN unit files with many tests, a slow static file and e2e files of one and five tests, in xdist's order
    units = _units(
        tests__unit__test_many=300,
        tests__unit__test_few=3,
        tests__static__test_sam_cli=2,
        tests__e2e__test_one=1,
        tests__e2e__test_five=5,
    )
    # WHEN they are ordered with nothing learned
    order = longest_first(units, {})
    # THEN the e2e files lead, the longer first; then the rest by their expected seconds
    assert order == [
        "tests/e2e/test_five.py",
        "tests/e2e/test_one.py",
        "tests/static/test_sam_cli.py",
        "tests/unit/test_many.py",
        "tests/unit/test_few.py",
    ]


def test_last_runs_seconds_reorder_within_a_group_but_never_put_a_file_before_the_stack_files() -> None:
    # GIVEN last run's seconds: the one-test e2e file took longest, and a unit file longer than any e2e file
    units = _units(tests__e2e__test_one=1, tests__e2e__test_five=5, tests__unit__test_slow=1)
    learned = {"tests/e2e/test_one.py": 400.0, "tests/e2e/test_five.py": 90.0, "tests/unit/test_slow.py": 900.0}
    # WHEN they are ordered THEN the learned figures decide within the e2e files, and the unit file still waits
    assert longest_first(units, learned) == [
        "tests/e2e/test_one.py",
        "tests/e2e/test_five.py",
        "tests/unit/test_slow.py",
    ]


def test_equal_files_keep_their_collection_order() -> None:
    units = _units(tests__unit__test_b=4, tests__unit__test_a=4, tests__unit__test_c=4)
    assert longest_first(units, {}) == ["tests/unit/test_b.py", "tests/unit/test_a.py", "tests/unit/test_c.py"]


def test_a_files_estimate_is_last_runs_else_a_known_figure_else_by_its_tests() -> None:
    known = next(iter(KNOWN_SECONDS))
    assert estimate(known, 2, {known: 12.5}) == 12.5
    assert estimate(known, 2, {}) == KNOWN_SECONDS[known]
    assert estimate("tests/e2e/test_x.py", 3, {}) == 3 * E2E_SECONDS_PER_TEST
    assert estimate("tests/unit/test_x.py", 10, {}) == 10 * SECONDS_PER_TEST


def test_only_files_under_tests_e2e_are_stack_files() -> None:
    assert is_stack_file("tests/e2e/test_pipeline.py")
    assert not is_stack_file("tests/unit/test_e2e_names.py")
    assert not is_stack_file("tests/integration/e2e/test_x.py")


def test_the_order_is_applied_to_xdists_queue_in_place() -> None:
    # GIVEN xdist's work queue (an OrderedDict, fewest tests last)
    queue: OrderedDict[str, dict[str, bool]] = OrderedDict(_units(tests__unit__test_a=9, tests__e2e__test_b=1))
    # WHEN the scheduler's reordering moves each file to the end in turn
    for path in longest_first(queue, {}):
        queue.move_to_end(path)
    # THEN the queue pops the e2e file first, with its tests
    assert queue.popitem(last=False) == ("tests/e2e/test_b.py", {"tests/e2e/test_b.py::t0": False})


def test_an_e2e_file_that_starts_a_stack_of_its_own_counts_that_start() -> None:
    own = next(iter(OWN_STACK_FILES))
    assert estimate(own, 1, {}) == E2E_SECONDS_PER_TEST + OWN_STACK_SECONDS
    assert estimate("tests/e2e/test_shared_stack_only.py", 1, {}) == E2E_SECONDS_PER_TEST
    # AND every file named here exists (a renamed file would silently lose its place)
    root = Path(__file__).resolve().parents[2]
    assert [name for name in [*OWN_STACK_FILES, *KNOWN_SECONDS] if not (root / name).is_file()] == []


def test_committed_figures_are_read_and_a_bad_file_gives_none(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text('{"tests/e2e/test_chaos.py": 312.5}')
    bad.write_text("not json")
    assert measured(good) == {"tests/e2e/test_chaos.py": 312.5}
    assert measured(bad) == {} and measured(tmp_path / "missing.json") == {}
