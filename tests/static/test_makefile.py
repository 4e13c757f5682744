"""The Makefile's own targets are phony: a file of a target's name (a `bench-try` folder, say) never makes
`make` skip it as up to date."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RULE = re.compile(r"^([a-z][a-z0-9-]*)\s*:(?!=)", re.MULTILINE)
PHONY = re.compile(r"^\.PHONY:(.*)$", re.MULTILINE)


def _unlisted(text: str) -> list[str]:
    listed = {name for line in PHONY.findall(text) for name in line.split()}
    return sorted({match.group(1) for match in RULE.finditer(text)} - listed)


def test_every_target_the_makefile_runs_is_phony() -> None:
    assert _unlisted((ROOT / "Makefile").read_text()) == []
    # a negative control: a target left off .PHONY is caught, a file target and a variable are not targets
    assert _unlisted(".PHONY: a\na: b\nb-c: a\n$(VENV)/.installed: x\nX := 1\n") == ["b-c"]
