"""The slicer refuses a manifest's bad options before it looks at any media."""

from __future__ import annotations

import json
from typing import Any

from fusionfleet.services.slicing import Slicer
from tests.support.fakes import FakeNotifier, FakeOrchestrator, FakeStorage
from tests.support.jobs import slicer_config

MEDIA, WORK = "media", "work"


def put_manifest(storage: FakeStorage, key: str, **fields: Any) -> None:
    """A manifest of one face and one clip, with these fields (or these in their place), at `key`."""
    manifest = {"version": 1, "source": ["inputs/face.jpg"], "target": "inputs/clip.mp4", **fields}
    storage.put_bytes(MEDIA, key, json.dumps(manifest).encode())


def rejected(storage: FakeStorage, key: str) -> tuple[str, dict[str, Any]]:
    """The slicer handles the manifest at `key` and rejects it, starting nothing: its reason and its notice."""
    notifier, orchestrator = FakeNotifier(), FakeOrchestrator()
    slicer = Slicer(storage, orchestrator, notifier, slicer_config(WORK, "arn:sm", "arn:topic"))
    outcome = slicer.handle(MEDIA, key)
    assert outcome.status == "rejected"
    assert orchestrator.starts == []
    ((_topic, _subject, notice),) = notifier.published
    return outcome.reason, notice


def test_a_bad_encoder_option_is_refused_before_any_media_is_read() -> None:
    # GIVEN a manifest asking for an encoder the fleet lacks, with media that would all be fine
    storage = FakeStorage()
    put_manifest(
        storage, "jobs/nvenc.json", options={"output_video_encoder": "h264_nvenc", "output_video_preset": "warp"}
    )
    storage.put_bytes(MEDIA, "inputs/face.jpg", b"\xff\xd8 not read")
    storage.put_bytes(MEDIA, "inputs/clip.mp4", b"not read either")
    # WHEN the slicer handles it THEN it is rejected with every encoder problem
    reason, notice = rejected(storage, "jobs/nvenc.json")
    assert "'h264_nvenc' needs NVIDIA's NVENC on every render worker" in reason
    assert len(notice["problems"]) == 2, notice
    # AND of the media bucket only the manifest was touched: no HEAD, GET or range read of the media
    media_calls = [(method, key) for method, bucket, key in storage.calls if bucket == MEDIA and method != "put_bytes"]
    assert media_calls == [("head", "jobs/nvenc.json"), ("get_bytes", "jobs/nvenc.json")]


def test_every_bad_face_image_is_named_in_one_rejection_before_the_target_is_probed() -> None:
    # GIVEN two source images that are not pictures and a reference that is empty
    storage = FakeStorage()
    put_manifest(storage, "jobs/faces.json", source=["inputs/a.jpg", "inputs/b.jpg"], reference="inputs/ref.jpg")
    storage.put_bytes(MEDIA, "inputs/a.jpg", b"shopping list")
    storage.put_bytes(MEDIA, "inputs/b.jpg", b"more shopping")
    storage.put_bytes(MEDIA, "inputs/ref.jpg", b"")
    storage.put_bytes(MEDIA, "inputs/clip.mp4", b"never probed")
    # WHEN the slicer handles the manifest THEN one rejection names all three images, and the target was never read
    _reason, notice = rejected(storage, "jobs/faces.json")
    assert [problem.split(" ")[0] for problem in notice["problems"]] == ["source[0]", "source[1]", "reference"]
    assert not [call for call in storage.calls if call[2] == "inputs/clip.mp4" and call[0].startswith("get_")]


def test_a_model_the_worker_image_does_not_carry_is_refused_at_validation() -> None:
    # GIVEN a FaceFusion job naming a deep swapper identity the image's "lite" download leaves out
    storage = FakeStorage()
    options = {"processors": ["deep_swapper"], "deep_swapper_model": "druuzil/adam_levine_320"}
    put_manifest(storage, "jobs/deep.json", engine="facefusion", options=options)
    # WHEN the slicer handles it THEN it is rejected naming the option, the model and what the image has
    reason, _notice = rejected(storage, "jobs/deep.json")
    assert "options.deep_swapper_model: the worker image does not carry the model 'druuzil/adam_levine_320'" in reason
    assert "iperov/elon_musk_224" in reason
