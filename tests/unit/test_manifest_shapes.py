"""A manifest is a job, a batch (`targets`) or a test render (`frames`, or `spread_frames`: a poster strip);
`faces` maps sources to people."""

from __future__ import annotations

import json

import pytest

from fusionfleet.errors import JobRejected
from fusionfleet.jobs.manifest import MAX_TARGETS, parse_manifest

KEY = "jobs/summer/alice.json"


def raw(**fields: object) -> bytes:
    base: dict[str, object] = {"version": 1, "source": ["inputs/alice.jpg"]}
    base.update(fields)
    return json.dumps({name: value for name, value in base.items() if value is not None}).encode()


def problems(data: bytes, key: str = KEY) -> tuple[str, ...]:
    with pytest.raises(JobRejected) as caught:
        parse_manifest(data, key)
    return caught.value.problems


def test_a_batch_names_keys_and_prefixes_and_gets_an_output_prefix() -> None:
    parsed = parse_manifest(raw(targets=["inputs/a.jpg", "inputs/clips/"], priority="low"), KEY)
    assert parsed.is_batch and not parsed.is_try
    assert parsed.targets == ("inputs/a.jpg", "inputs/clips/")
    assert parsed.output == "outputs/summer/alice/"
    # AND each item is an ordinary job with the batch's sources, options and priority
    item = parsed.item("inputs/a.jpg", "outputs/summer/alice/a.jpg")
    assert (item.target, item.targets, item.priority, item.source) == ("inputs/a.jpg", (), "low", ("inputs/alice.jpg",))


def test_a_target_and_targets_together_or_neither_are_refused() -> None:
    assert any("give one of them" in p for p in problems(raw(target="inputs/a.mp4", targets=["inputs/b.mp4"])))
    assert any("target: is required (or `targets`" in p for p in problems(raw()))


def test_a_batchs_output_must_be_a_prefix_and_its_targets_stay_in_bounds() -> None:
    found = problems(raw(targets=["inputs/a.jpg", "../etc/", "work/x/"], output="outputs/one.mp4"))
    text = " | ".join(found)
    assert "output: 'outputs/one.mp4' must be a prefix ending in '/'" in text
    assert "targets[1]: key '../etc'" in text and "targets[2]: key 'work/x' is under a reserved prefix" in text


def test_a_batch_takes_at_most_its_limit_of_targets() -> None:
    found = problems(raw(targets=[f"inputs/{i}.jpg" for i in range(MAX_TARGETS + 1)]))
    assert any(f"targets: takes at most {MAX_TARGETS} entries" in p for p in found)


def test_a_test_render_names_frames_of_one_target() -> None:
    parsed = parse_manifest(raw(target="inputs/clip.mp4", frames=[0, 120, 240]), KEY)
    assert parsed.is_try and parsed.frames == (0, 120, 240) and parsed.output == "outputs/summer/alice/"
    found = " | ".join(problems(raw(targets=["inputs/clip.mp4"], frames=[0, 0, -1])))
    assert "not of a batch's `targets`" in found and "each frame once" in found and "start at 0" in found


def test_a_poster_strip_asks_for_frames_spread_over_one_target_without_naming_them() -> None:
    parsed = parse_manifest(raw(target="inputs/clip.mp4", spread_frames=8, engine="copy"), KEY)
    assert parsed.is_try and parsed.frames == () and parsed.spread_frames == 8
    assert parsed.output == "outputs/summer/alice/"  # a prefix of pictures, as for `frames`
    found = " | ".join(problems(raw(targets=["inputs/clip.mp4"], spread_frames=4)))
    assert "spread_frames: a test render renders frames of one `target`" in found
    both = " | ".join(problems(raw(target="inputs/clip.mp4", spread_frames=4, frames=[1])))
    assert "frames and spread_frames: give one of them" in both
    too_many = " | ".join(problems(raw(target="inputs/clip.mp4", spread_frames=17)))
    assert "spread_frames" in too_many and "16" in too_many
    assert not parse_manifest(raw(target="inputs/clip.mp4"), KEY).is_try  # 0, the default: a whole job


def test_item_notices_apply_to_batches_only() -> None:
    assert any("applies to batches" in p for p in problems(raw(target="inputs/a.mp4", item_notices=True)))
    assert parse_manifest(raw(targets=["inputs/a.mp4"], item_notices=True), KEY).item_notices


def test_an_image_output_is_taken_and_other_extensions_are_named() -> None:
    assert parse_manifest(raw(target="inputs/a.png", output="outputs/a.webp"), KEY).output == "outputs/a.webp"
    found = problems(raw(target="inputs/a.png", output="outputs/a.gif"))
    assert any("must end in a video container FaceFusion writes" in p and "or an image extension" in p for p in found)


def test_faces_map_each_source_to_a_reference_image_or_frame() -> None:
    faces = [
        {"source": "inputs/alice.jpg", "reference_frame": 0, "reference_face_position": 1},
        {"source": ["inputs/bob-1.jpg", "inputs/bob-2.jpg"], "reference": "inputs/bob-there.jpg"},
    ]
    parsed = parse_manifest(raw(source=None, target="inputs/group.mp4", faces=faces), KEY)
    assert parsed.all_sources == ("inputs/alice.jpg", "inputs/bob-1.jpg", "inputs/bob-2.jpg")
    assert parsed.faces[0].reference_face_position == 1 and parsed.faces[1].reference == "inputs/bob-there.jpg"


def test_faces_problems_are_named_each() -> None:
    faces = [{"source": "inputs/a.jpg"}, {"source": "../x.jpg", "reference": "inputs/r.jpg", "reference_frame": 3}]
    found = " | ".join(
        problems(
            raw(target="inputs/g.mp4", faces=faces, reference="inputs/r.jpg", options={"face_selector_mode": "many"})
        )
    )
    assert "faces[0]: give the person's reference face" in found and "faces[1]: give the person's" in found
    assert "source and faces: give one of them" in found
    assert "reference: with `faces` each mapping names its own reference" in found
    assert "face_selector_mode must be 'reference'" in found
    assert "faces[1].source[0]: key '../x.jpg'" in found
