"""The slicer refuses a manifest's bad options before it looks at any media."""

from __future__ import annotations

import json

from fusionfleet.services.slicing import Slicer
from tests.support.fakes import FakeNotifier, FakeOrchestrator, FakeStorage
from tests.support.jobs import slicer_config

MEDIA, WORK = "media", "work"


def test_a_bad_encoder_option_is_refused_before_any_media_is_read() -> None:
    # GIVEN a manifest asking for an encoder the fleet lacks, with media that would all be fine
    storage = FakeStorage()
    manifest = {
        "version": 1,
        "source": ["inputs/face.jpg"],
        "target": "inputs/clip.mp4",
        "options": {"output_video_encoder": "h264_nvenc", "output_video_preset": "warp"},
    }
    storage.put_bytes(MEDIA, "jobs/nvenc.json", json.dumps(manifest).encode())
    storage.put_bytes(MEDIA, "inputs/face.jpg", b"\xff\xd8 not read")
    storage.put_bytes(MEDIA, "inputs/clip.mp4", b"not read either")
    notifier, orchestrator = FakeNotifier(), FakeOrchestrator()
    slicer = Slicer(storage, orchestrator, notifier, slicer_config(WORK, "arn:sm", "arn:topic"))
    # WHEN the slicer handles it
    outcome = slicer.handle(MEDIA, "jobs/nvenc.json")
    # THEN it is rejected with every encoder problem
    assert outcome.status == "rejected"
    assert "'h264_nvenc' needs NVIDIA's NVENC on every render worker" in outcome.reason
    assert orchestrator.starts == []
    ((_topic, _subject, notice),) = notifier.published
    assert len(notice["problems"]) == 2, notice
    # AND of the media bucket only the manifest was touched: no HEAD, GET or range read of the media
    media_calls = [(method, key) for method, bucket, key in storage.calls if bucket == MEDIA and method != "put_bytes"]
    assert media_calls == [("head", "jobs/nvenc.json"), ("get_bytes", "jobs/nvenc.json")]


def test_every_bad_face_image_is_named_in_one_rejection_before_the_target_is_probed() -> None:
    # GIVEN two source images that are not pictures and a reference that is empty
    storage = FakeStorage()
    manifest = {"version": 1, "source": ["inputs/a.jpg", "inputs/b.jpg"], "target": "inputs/clip.mp4"}
    storage.put_bytes(MEDIA, "jobs/faces.json", json.dumps({**manifest, "reference": "inputs/ref.jpg"}).encode())
    storage.put_bytes(MEDIA, "inputs/a.jpg", b"shopping list")
    storage.put_bytes(MEDIA, "inputs/b.jpg", b"more shopping")
    storage.put_bytes(MEDIA, "inputs/ref.jpg", b"")
    storage.put_bytes(MEDIA, "inputs/clip.mp4", b"never probed")
    notifier, orchestrator = FakeNotifier(), FakeOrchestrator()
    slicer = Slicer(storage, orchestrator, notifier, slicer_config(WORK, "arn:sm", "arn:topic"))
    # WHEN the slicer handles the manifest
    outcome = slicer.handle(MEDIA, "jobs/faces.json")
    # THEN one rejection names all three images, and the target was never read
    assert outcome.status == "rejected"
    assert orchestrator.starts == []
    ((_topic, _subject, notice),) = notifier.published
    assert [problem.split(" ")[0] for problem in notice["problems"]] == ["source[0]", "source[1]", "reference"]
    assert not [call for call in storage.calls if call[2] == "inputs/clip.mp4" and call[0].startswith("get_")]


def test_a_model_the_worker_image_does_not_carry_is_refused_at_validation() -> None:
    # GIVEN a FaceFusion job naming a deep swapper identity the image's "lite" download leaves out
    storage = FakeStorage()
    manifest = {
        "version": 1,
        "source": ["inputs/face.jpg"],
        "target": "inputs/clip.mp4",
        "engine": "facefusion",
        "options": {"processors": ["deep_swapper"], "deep_swapper_model": "druuzil/adam_levine_320"},
    }
    storage.put_bytes(MEDIA, "jobs/deep.json", json.dumps(manifest).encode())
    notifier, orchestrator = FakeNotifier(), FakeOrchestrator()
    slicer = Slicer(storage, orchestrator, notifier, slicer_config(WORK, "arn:sm", "arn:topic"))
    # WHEN the slicer handles it THEN it is rejected naming the option, the model and what the image has
    outcome = slicer.handle(MEDIA, "jobs/deep.json")
    assert outcome.status == "rejected"
    assert "options.deep_swapper_model: the worker image does not carry the model 'druuzil/adam_levine_320'" in (
        outcome.reason
    )
    assert "iperov/elon_musk_224" in outcome.reason
    assert orchestrator.starts == []
