"""render.asl.json judged by asl-validator (npm, pinned in infra/iam/package.json; `make iam-env`),
the ecosystem's Amazon States Language validator: its JSON schemas of every state type, the paths in
InputPath/OutputPath/ResultPath and the like, and each Task's Resource ARN. It runs on the definition
as CloudFormation substitutes it on an AWS stage, so the ARNs it checks are the ones AWS receives.

What it cannot know: whether a service integration takes the parameters given (botocore's models:
test_api_requests.py), nor LocalStack's or AWS's run-time limits (test_state_machine.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.api_shapes import substituted_definition
from tests.support.cfn import ROOT

VALIDATOR = ROOT / "infra" / "iam" / "node_modules" / "asl-validator" / "dist" / "bin" / "asl-validator.js"


def asl_validator(definition: dict[str, Any], folder: Path) -> tuple[int, str]:
    """(exit status, output) of asl-validator on a definition: 0 valid, 1 invalid, 2 it failed."""
    node = shutil.which("node")
    assert node, "asl-validator needs Node 20 or newer (apt-get install nodejs npm)"
    assert VALIDATOR.is_file(), f"asl-validator is not installed ({VALIDATOR}): run make iam-env"
    path = folder / "render.asl.json"
    path.write_text(json.dumps(definition))
    done = subprocess.run(
        [node, str(VALIDATOR), "--json-path", str(path)], capture_output=True, text=True, timeout=120, check=False
    )
    return done.returncode, done.stdout + done.stderr


def test_the_state_machine_passes_asl_validator(tmp_path: Path) -> None:
    # GIVEN the definition as Step Functions receives it on an AWS stage
    # WHEN asl-validator checks it (schemas, paths, Resource ARNs)
    status, output = asl_validator(substituted_definition(), tmp_path)
    # THEN it is valid
    assert status == 0, output
    assert "is valid" in output


def _state(definition: dict[str, Any], name: str) -> dict[str, Any]:
    for state_name, state in definition["States"].items():
        if state_name == name:
            return dict(state)
        processor = state.get("ItemProcessor") or state.get("Iterator")
        if processor:
            try:
                return _state(processor, name)
            except KeyError:
                pass
    raise KeyError(name)


@pytest.mark.parametrize(
    ("state", "key", "value"),
    [
        ("WakeMerge", "Type", "Taks"),  # a state type that does not exist
        ("WakeMerge", "ResultPath", "wake"),  # a path that is not one
        ("WakeMerge", "Resource", "ecs:updateService"),  # not an ARN
        ("RenderHigh", "TimeoutSeconds", -1),  # below the schema's minimum
    ],
)
def test_asl_validator_refuses_a_broken_state(tmp_path: Path, state: str, key: str, value: Any) -> None:
    # GIVEN the definition with one state broken (a nested Map state too: RenderHigh)
    definition = substituted_definition()
    _state(definition, state)  # it exists
    _patch(definition, state, key, value)
    # WHEN asl-validator checks it THEN it says the definition is invalid
    status, output = asl_validator(definition, tmp_path)
    assert status == 1, output


def _patch(definition: dict[str, Any], name: str, key: str, value: Any) -> None:
    for state_name, state in definition["States"].items():
        if state_name == name:
            state[key] = value
            return
        processor = state.get("ItemProcessor") or state.get("Iterator")
        if processor:
            _patch(processor, name, key, value)
