"""The SAM CLI on the template, offline: `sam validate --lint` and `sam build` (functions/Makefile).

The SAM CLI lives in its own virtual environment (`make sam-env`, which `make test` runs first): its pins
would fight the project's. Without it these tests are skipped, saying how to create it. `sam build`
fetches the Lambda wheels from PyPI, as a user's build does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.packages import MEDIA_FUNCTIONS, MEDIA_MODULES, functions, handler_module

ROOT = Path(__file__).resolve().parents[2]
SAM = ROOT / ".venv-sam" / "bin" / "sam"
LAMBDA_PYTHON = "python3.12"  # the functions' runtime
UNZIPPED_LIMIT_MB = 250

pytestmark = pytest.mark.skipif(not SAM.exists(), reason="the SAM CLI's environment is missing: run `make sam-env`")


def _sam(*arguments: str, cwd: Path = ROOT, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    # Any region and credentials: nothing here calls AWS.
    env = {
        **os.environ,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "offline",
        "AWS_SECRET_ACCESS_KEY": "offline",
        "SAM_CLI_TELEMETRY": "0",
    }
    return subprocess.run(
        [str(SAM), *arguments], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def test_sam_validate_lint_passes() -> None:
    result = _sam("validate", "--lint", "--template-file", "template.yaml")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "is a valid SAM Template" in result.stdout + result.stderr


def _lambda_python() -> str | None:
    """The real path of a Python 3.12 interpreter, if there is one (a pyenv shim needs PYENV_VERSION)."""
    if shutil.which(LAMBDA_PYTHON) is None:
        return None
    for extra in ({}, {"PYENV_VERSION": "3.12"}):
        probe = subprocess.run(
            [LAMBDA_PYTHON, "-c", "import sys; print(sys.executable)"],
            env={**os.environ, **extra},
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0 and probe.stdout.strip():
            return probe.stdout.strip()
    return None


def _size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


@pytest.mark.slow
def test_sam_build_makes_every_function_within_lambdas_limit(tmp_path: Path) -> None:
    # GIVEN the template's functions
    declared = functions()
    # WHEN sam build runs their Makefile targets
    result = _sam("build", "--template-file", str(ROOT / "template.yaml"), "--build-dir", str(tmp_path / "build"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    python = _lambda_python()
    for name in declared:
        package = tmp_path / "build" / name
        # THEN each package exists within Lambda's unzipped limit
        assert package.is_dir(), name
        assert _size_mb(package) < UNZIPPED_LIMIT_MB, name
        if python is None:
            continue
        # AND its handler imports on the Lambda runtime's Python from the package alone (no site-packages),
        # the control functions without any media library
        module = handler_module(name)
        code = f"import sys, {module}; print(','.join(m for m in {MEDIA_MODULES!r} if m in sys.modules))"
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(package), "AWS_REGION": "us-east-1"}
        run = subprocess.run(
            [python, "-S", "-s", "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
        )
        assert run.returncode == 0, (name, run.stderr[-2000:])
        if name not in MEDIA_FUNCTIONS:
            assert run.stdout.strip() == "", (name, run.stdout)
            assert _size_mb(package) < 80, name
