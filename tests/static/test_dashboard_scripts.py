"""The dashboard's scripts parse: a syntax error leaves both pages blank, and no other test reads them
until a browser does (`node --check`, where Node is installed; `make iam-env` needs it too)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

STATIC = Path(__file__).resolve().parents[2] / "fleetctl" / "dashboard" / "static"


@pytest.mark.parametrize("script", sorted(path.name for path in STATIC.glob("*.js")))
def test_the_script_parses(script: str) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    checked = subprocess.run([node, "--check", str(STATIC / script)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stderr
