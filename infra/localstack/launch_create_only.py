"""LocalStack for the AWS stage's deploy check (tests/e2e/test_aws_stage_deploys.py): Lambda functions
are created and never run.

Runs in LocalStack's own environment, like launch.py. LocalStack prepares a new function for running as
it creates it: it downloads its runtime-init binary and pulls the runtime's Docker image, and without
Docker or internet the function ends Failed, failing the stack. Here preparing only unpacks the code
(a broken archive still fails); the function is created Active with its role, configuration and event
sources checked, and invoking it would fail. The farm's own local stack never creates a function.
"""

from __future__ import annotations

import importlib
import runpy
import sys
from pathlib import Path
from typing import Any

# The repository's root: launch.py beside this file, importable in LocalStack's environment too.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from infra.localstack.launch import memoise_jsonpath


def create_functions_without_a_runtime() -> None:
    # By name: LocalStack is installed in its own environment only, where mypy does not look.
    executor: Any = importlib.import_module("localstack.services.lambda_.invocation.docker_runtime_executor")

    def prepare_version(cls: Any, function_version: Any) -> None:
        if function_version.config.code:
            function_version.config.code.prepare_for_execution()

    executor.DockerRuntimeExecutor.prepare_version = classmethod(prepare_version)


if __name__ == "__main__":
    memoise_jsonpath()
    create_functions_without_a_runtime()
    runpy.run_module("localstack.runtime.main", run_name="__main__", alter_sys=True)
