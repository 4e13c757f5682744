"""`fusionfleet submit --facefusion-job JOB.json --api URL`: a FaceFusion job file through the tenant HTTP API
(the real API handler behind the local gateway's JWT checks, over moto: tests/integration/test_cli_api.py's
`served`), a `POST /jobs` per job, each a job of the token's tenant that `status` follows at once; a remix
chain that runs as passes one job, its manifest's `faces` one mapping a step, as through the stack."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetctl.api_client import ApiClient, ApiError
from fleetctl.cli import main
from fleetctl.exits import Exit
from fusionfleet.jobs.manifest import parse_manifest
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


def test_a_remix_chain_is_one_job_of_chained_passes_through_the_api(
    served: Served,  # noqa: F811
    tmp_path: Path,
    aws: Aws,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN job-remix-step's chain: a's face on the face at 0 of frame 0, then b's on the face at 1 of frame 3
    for name in ("a.png", "b.png"):
        (tmp_path / name).write_bytes(PNG + name.encode())
    (tmp_path / "clip.mp4").write_bytes(b"clip")
    steps = [
        {"source_paths": [str(tmp_path / "a.png")], "target_path": str(tmp_path / "clip.mp4"),
         "output_path": str(tmp_path / "out" / "one.mp4"), "reference_frame_number": 0, "reference_face_position": 0},
        {"source_paths": [str(tmp_path / "b.png")], "target_path": str(tmp_path / "out" / "one-remix-0.mp4"),
         "output_path": str(tmp_path / "out" / "two.mkv"), "reference_frame_number": 3, "reference_face_position": 1},
    ]  # fmt: skip
    path = tmp_path / "remix.json"
    path.write_text(json.dumps({"version": "1", "date_created": "2026-12-07T10:00:00+00:00", "date_updated": None,
                                "steps": [{"args": args, "status": "queued"} for args in steps]}))  # fmt: skip
    # WHEN a tenant submits it through the API without --wait (a remix waiting for its step would need it)
    argv = ["submit", "--facefusion-job", str(path), "--name", "remix"]
    assert main([*argv, "--api", served.url, "--token", served.token()]) == Exit.DONE
    # THEN two jobs at once, as through the stack: the first step alone, and the chain as ONE job
    ids = capsys.readouterr().out.split()
    assert len(ids) == 2
    listed = aws.s3.list_objects_v2(Bucket=aws.media_bucket, Prefix="tenants/acme/jobs/")["Contents"]
    assert sorted(item["Key"] for item in listed) == sorted(f"tenants/acme/jobs/{job_id}.json" for job_id in ids)

    def read(key: str) -> bytes:
        return bytes(aws.s3.get_object(Bucket=aws.media_bucket, Key=key)["Body"].read())

    first, chain = (json.loads(read(f"tenants/acme/jobs/{job_id}.json")) for job_id in ids)
    # AND the chain's job is on the ORIGINAL target (no intermediate output), its output the last step's container
    assert read(first["target"]) == read(chain["target"]) == b"clip"
    assert chain["output"] == f"tenants/acme/outputs/{ids[1]}/remix-1.mkv"
    # AND its manifest holds both passes: each step's sources on its person, by the original target's frames
    assert "source" not in chain and chain["engine"] == "facefusion"
    people = [(read(face["source"][0]), face["reference_frame"], face["reference_face_position"])
              for face in chain["faces"]]  # fmt: skip
    assert people == [(PNG + b"a.png", 0, 0), (PNG + b"b.png", 3, 1)]
    assert "reference_frame_number" not in chain.get("options", {})
    # AND it is a manifest the slicer takes, and a job `status` follows at once
    assert len(parse_manifest(json.dumps(chain).encode(), f"tenants/acme/jobs/{ids[1]}.json").faces) == 2
    assert main(["status", ids[1], "--json", "--api", served.url, "--token", served.token()]) == Exit.DONE
    assert json.loads(capsys.readouterr().out)["state"] == "PENDING"


def test_faces_an_engine_cannot_render_are_refused_at_post_as_the_slicer_refuses_them(
    served: Served,  # noqa: F811
) -> None:
    api = ApiClient(served.url, served.token())
    body = {"version": 1, "target": "clip.mp4", "engine": "copy",
            "faces": [{"source": ["a.png"], "reference_frame": 0}]}  # fmt: skip
    with pytest.raises(ApiError) as refused:
        api.call("POST", "/jobs", body)
    assert refused.value.status == 400
    assert "faces: the copy engine swaps no faces; use classic" in str(refused.value)
    # AND on an engine that maps faces, each mapping's plain file names get uploads
    created = api.call("POST", "/jobs", {**body, "engine": "facefusion"})
    assert sorted(upload["name"] for upload in created["uploads"]) == ["a.png", "clip.mp4"]
