"""`fusionfleet submit --facefusion-job JOB.json --api URL`: a FaceFusion job file through the tenant HTTP API
(the real API handler behind the local gateway's JWT checks, over moto: tests/integration/test_cli_api.py's
`served`), a `POST /jobs` per step, each a job of the token's tenant that `status` follows at once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetctl.cli import main
from fleetctl.exits import Exit
from tests.integration.conftest import Aws
from tests.integration.test_cli_api import PNG, Served, served  # noqa: F401  (served: the fixture)


def job_file(folder: Path, **options: object) -> Path:
    """Two steps on two stills, as FaceFusion's job-add-step writes them (unset options null)."""
    (folder / "face.png").write_bytes(PNG)
    steps = []
    for name in ("first", "second"):
        (folder / f"{name}.png").write_bytes(PNG)
        args = {"source_paths": [str(folder / "face.png")], "target_path": str(folder / f"{name}.png"),
                "output_path": str(folder / "out" / f"{name}.png"), "output_video_fps": None, **options}  # fmt: skip
        steps.append({"args": args, "status": "drafted"})
    path = folder / "stills.json"
    path.write_text(json.dumps({"version": "1", "date_created": "2026-12-07T10:00:00+00:00", "date_updated": None,
                                "steps": steps}))  # fmt: skip
    return path


def test_each_step_is_a_job_of_the_tenant_through_the_api(
    served: Served,  # noqa: F811
    tmp_path: Path,
    aws: Aws,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN a job file of two steps
    path = job_file(tmp_path, output_image_quality=90)
    # WHEN a tenant submits it through the API
    argv = ["submit", "--facefusion-job", str(path), "--engine", "copy", "--name", "stills"]
    assert main([*argv, "--api", served.url, "--token", served.token()]) == Exit.DONE
    ids = capsys.readouterr().out.split()
    # THEN each step is a job of the tenant's, named after the step, with the step's options, PENDING at once
    assert len(ids) == 2
    for index, job_id in enumerate(ids):
        key = f"tenants/acme/jobs/{job_id}.json"
        manifest = json.loads(aws.s3.get_object(Bucket=aws.media_bucket, Key=key)["Body"].read())
        assert manifest["output"] == f"tenants/acme/outputs/{job_id}/stills-{index}.png"
        assert (manifest["engine"], manifest["options"]) == ("copy", {"output_image_quality": 90})
        assert main(["status", job_id, "--json", "--api", served.url, "--token", served.token()]) == Exit.DONE
        assert json.loads(capsys.readouterr().out)["state"] == "PENDING"


def test_an_option_the_engine_would_not_apply_is_refused_before_any_request(
    served: Served,  # noqa: F811
    tmp_path: Path,
    aws: Aws,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = job_file(tmp_path, face_enhancer_blend=50)
    argv = ["submit", "--facefusion-job", str(path), "--engine", "copy"]
    assert main([*argv, "--api", served.url, "--token", served.token()]) == Exit.REJECTED
    said = capsys.readouterr().err
    assert "steps[0]: options.face_enhancer_blend: the copy engine does not apply it" in said
    assert "steps[1]: options.face_enhancer_blend" in said
    assert aws.s3.list_objects_v2(Bucket=aws.media_bucket).get("KeyCount", 0) == 0
