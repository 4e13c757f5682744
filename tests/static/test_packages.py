"""The Lambda packages functions/Makefile builds for `sam build`: one target per function in the template,
and the control functions (dead letters, watchdog) small: they import neither PyAV nor numpy, so their
package leaves out the slicer's media stack (193 MB unzipped)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.packages import MEDIA_MODULES, control_functions, functions, handler_module

ROOT = Path(__file__).resolve().parents[2]
MAKEFILE = ROOT / "functions" / "Makefile"


def test_every_function_has_a_build_target() -> None:
    text = MAKEFILE.read_text()
    targets = {t for line in re.findall(r"^(build-[^:]+):", text, re.MULTILINE) for t in line.split()}
    for name, resource in functions().items():
        assert resource["Metadata"] == {"BuildMethod": "makefile"}, name
        assert f"build-{name}" in targets, name


@pytest.mark.parametrize("function", control_functions())
def test_control_functions_import_no_media_library(function: str) -> None:
    # GIVEN a fresh interpreter
    module = handler_module(function)
    code = f"import sys, {module}; print(','.join(m for m in {MEDIA_MODULES!r} if m in sys.modules))"
    # WHEN it imports the function's handler module
    env = {**os.environ, "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1"}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    # THEN none of the media libraries was loaded, so its package may leave them out
    assert result.stdout.strip() == "", result.stdout


@pytest.mark.parametrize("function", control_functions())
def test_control_function_packages_leave_out_the_media_stack(function: str) -> None:
    # GIVEN what make would run for the function's target
    dry_run = subprocess.run(
        ["make", "-n", "-f", str(MAKEFILE), f"build-{function}", "ARTIFACTS_DIR=/tmp/unused"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # THEN fusionfleet goes in without its dependencies and without the slicer extra
    assert "--no-deps" in dry_run and "[slicer]" not in dry_run
    # AND only the pinned control dependencies are added
    installs = [line for line in dry_run.splitlines() if "pip install" in line and "--no-deps" not in line]
    assert installs
    for line in installs:
        assert not re.search(r"\b(av|numpy|imageio-ffmpeg)==", line), line
        assert "boto3==" in line and "pydantic==" in line and "aws-lambda-powertools[parser]==" in line
