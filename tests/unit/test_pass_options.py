"""A mapping of `faces` with options of its own (a pass of a FaceFusion job file's remix chain, issue 44): what
a pass may set and what stays the job's, each refused at submit with its reason. Pure."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fusionfleet.errors import JobRejected
from fusionfleet.jobs.faces import engine_problem
from fusionfleet.jobs.manifest import parse_manifest

KEY = "jobs/chain/manifest.json"


def manifest(*passes: dict[str, Any] | None, **options: Any) -> bytes:
    faces = [
        {"source": f"inputs/{index}.png", "reference_frame": 0, **({} if own is None else {"options": own})}
        for index, own in enumerate(passes)
    ]
    return json.dumps({"faces": faces, "target": "inputs/t.mp4", "options": options}).encode()


def problems(raw: bytes) -> str:
    with pytest.raises(JobRejected) as refused:
        parse_manifest(raw, KEY)
    return " | ".join(refused.value.problems)


def test_swap_then_enhance_is_a_job_of_two_passes_with_their_own_options() -> None:
    raw = manifest({"processors": ["face_swapper"]}, {"processors": ["face_enhancer"], "face_enhancer_blend": 70})
    parsed = parse_manifest(raw, KEY)
    assert [face.options for face in parsed.faces] == [
        {"processors": ["face_swapper"]},
        {"processors": ["face_enhancer"], "face_enhancer_blend": 70},
    ]


def test_passes_that_each_pick_their_faces_need_no_reference_mode_of_the_job() -> None:
    parse_manifest(
        manifest({"face_selector_mode": "one"}, {"face_selector_mode": "many"}, face_selector_mode="one"), KEY
    )
    # a mapping without options of its own still picks its person by a reference face
    assert "face_selector_mode must be 'reference'" in problems(manifest(None, {}, face_selector_mode="one"))


@pytest.mark.parametrize(
    ("passes", "said"),
    [
        (({"face_enhancer_blend": 170}, None), "faces[0].options.face_enhancer_blend"),
        (({"trim_frame_start": 5}, None), "faces[0].options.trim_frame_start: the job's, not a pass's"),
        ((None, {"reference_face_position": 1}), "faces[1].options.reference_face_position: the job's"),
        (({"output_video_scale": 2.0}, None), "a pass cannot change the frames' size or rate"),
        (({"processors": ["lip_syncer"]}, None), "the lip syncer hears the job's voice"),
        (({"processors": ["frame_enhancer"]}, {}), "only the last pass may run it"),
    ],
)
def test_what_a_pass_cannot_do_is_refused_with_the_reason(passes: tuple[Any, ...], said: str) -> None:
    assert said in problems(manifest(*passes))


def test_a_frame_enhancer_in_the_last_pass_is_a_pass_like_any() -> None:
    parse_manifest(manifest({}, {"processors": ["frame_enhancer"]}), KEY)


def test_only_facefusion_runs_a_mapping_with_options_of_its_own() -> None:
    faces = parse_manifest(manifest({}, {"processors": ["face_enhancer"]}), KEY).faces
    assert engine_problem("facefusion", faces) is None
    assert "only the facefusion engine runs a mapping with options" in str(engine_problem("classic", faces))
    assert engine_problem("classic", parse_manifest(manifest(None, None), KEY).faces) is None
