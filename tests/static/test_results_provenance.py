"""Every results file says which code, when and under what load produced it.

A figure quoted in docs/ is traceable only through its file's provenance; a result written before
provenance existed says so (backfilled from git history, load not recorded) rather than pass as fresh.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
FILES = sorted(RESULTS.glob("*.json"))


def test_there_are_results_to_check() -> None:
    assert FILES, f"no results files under {RESULTS}"


@pytest.mark.parametrize("path", FILES, ids=[path.name for path in FILES])
def test_results_file_records_commit_date_load_and_configuration(path: Path) -> None:
    provenance = json.loads(path.read_text()).get("provenance")
    assert isinstance(provenance, dict), f"{path.name} has no provenance (write it with benchmarks.provenance)"
    assert len(str(provenance.get("commit", ""))) == 40, f"{path.name}: commit is not a full hash"
    assert datetime.fromisoformat(str(provenance.get("date"))).tzinfo is not None, f"{path.name}: no UTC date"
    assert "config" in provenance, f"{path.name}: no configuration"
    if provenance.get("backfilled"):
        assert provenance.get("load_average") is None, f"{path.name}: a backfilled record cannot know the load"
    else:
        load = provenance.get("load_average")
        assert isinstance(load, dict) and {"1m", "5m", "15m"} <= load.keys(), f"{path.name}: no machine load"
