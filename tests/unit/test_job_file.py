"""A FaceFusion job file read as the farm's jobs (fusionfleet.facefusion.job_file): its steps, remix steps,
outputs and options, and every refusal with its reason. The files here are written the way FaceFusion 3.8.1's
job commands write them (tests/integration/engines/test_job_files.py reads ones FaceFusion itself wrote)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fusionfleet.errors import JobRejected
from fusionfleet.facefusion.job_file import (
    chain_as_faces,
    chain_refusal,
    read_job_file,
    step_output_path,
    without_defaults,
)
from fusionfleet.jobs.engine_options import honoured


def step(target: str, output: str | None, **options: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"source_paths": ["/in/face.png"], "target_path": target, "output_path": output}
    args.update({"face_selector_age_start": None, "output_video_fps": None, **options})
    return {"args": args, "status": "drafted"}


def job(*steps: dict[str, Any], **fields: Any) -> bytes:
    body = {"version": "1", "date_created": "2026-12-07T09:55:45+00:00", "date_updated": None, "steps": list(steps)}
    return json.dumps({**body, **fields}).encode()


def refusal(raw: bytes, job_id: str = "myjob") -> tuple[str, ...]:
    with pytest.raises(JobRejected) as refused:
        read_job_file(raw, job_id)
    assert refused.value.reason.startswith("the FaceFusion job file cannot run on the farm: ")
    return refused.value.problems


def test_steps_become_jobs_with_their_paths_and_options_and_unset_options_left_out() -> None:
    # GIVEN two steps, as job-add-step writes them (unset options as null)
    raw = job(
        step("/in/a.mp4", "/out/a.mp4", face_selector_mode="many", face_mask_padding=[0, 0, 0, 0]),
        step("/in/b.mp4", "/out/b.mp4", processors=["face_swapper", "face_enhancer"]),
    )
    # WHEN read
    found = read_job_file(raw, "myjob")
    # THEN each step is a job: its source, target, output, and its options as any manifest's are normalised
    first, second = found.steps
    assert (first.sources, first.target, first.output, first.remix_of) == (
        ("/in/face.png",),
        "/in/a.mp4",
        "/out/a.mp4",
        None,
    )
    assert dict(first.options) == {"face_mask_padding": [0, 0, 0, 0], "face_selector_mode": "many"}
    assert dict(second.options) == {"processors": ["face_swapper", "face_enhancer"]}
    assert not found.remixes


def test_a_remix_step_is_known_by_the_per_step_file_job_run_names_even_in_a_renamed_file() -> None:
    # GIVEN job-remix-step's step: its target is step 0's file as job-run names it (<output>-<job id>-0<ext>)
    assert step_output_path("myjob", 0, "/out/a.mp4") == "/out/a-myjob-0.mp4"
    raw = job(step("/in/a.mp4", "/out/a.mp4"), step("/out/a-myjob-0.mp4", "/out/b.mp4"))
    # THEN it remixes step 0, by the file's own id and, in a copy renamed, by the per-step file's shape
    assert [s.remix_of for s in read_job_file(raw, "myjob").steps] == [None, 0]
    assert [s.remix_of for s in read_job_file(raw, "copy-of-myjob").steps] == [None, 0]
    # AND a chain remixes each step in turn
    chain = job(
        step("/in/a.mp4", "/out/a.mp4"), step("/out/a-j-0.mp4", "/out/b.mp4"), step("/out/b-j-1.mp4", "/out/c.mp4")
    )
    assert [s.remix_of for s in read_job_file(chain, "j").steps] == [None, 0, 1]


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (
            {"face_swaper_model": "x"},
            "steps[0].args.face_swaper_model: unknown option; did you mean 'face_swapper_model'?",
        ),
        (
            {"execution_providers": ["cuda"]},
            "steps[0].args.execution_providers: execution_providers is set by the worker",
        ),
        ({"log_level": "debug"}, "steps[0].args.log_level: log_level is set by the worker, not by the job"),
        ({"temp_path": "/tmp"}, "steps[0].args.temp_path: temp_path is set by the worker, not by the job"),
        ({"face_selector_mode": "all"}, "steps[0].args.face_selector_mode: 'all' is not one of many, one, reference"),
        ({"face_detector_score": 0.33}, "steps[0].args.face_detector_score: 0.33 is not a multiple of 0.05"),
    ],
)
def test_options_are_judged_as_any_jobs_and_refused_with_the_reason(options: dict[str, Any], said: str) -> None:
    problems = refusal(job(step("/in/a.mp4", "/out/a.mp4", **options)))
    assert any(problem.startswith(said) for problem in problems), problems


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        (job(step("/in/a.mp4", "/out/a.mp4"), version="2"), "version: '2' is not FaceFusion 3.8.1's"),
        (job(), "steps: a job needs at least one step"),
        (job(step("/in/a.mp4", "/out/a.mp4"), owner="me"), "owner: unknown field"),
        (
            job(
                {"args": {"source_paths": None, "target_path": "/a.mp4", "output_path": "/o.mp4"}, "status": "drafted"}
            ),
            "steps[0].args.source_paths is not set",
        ),
        (job(step("/in/a.mp4", None)), "steps[0].args.output_path is not set"),
        (job(step("/in/a.mp4", "/out/")), "steps[0].args.output_path: '/out/' must name a file"),
        (job(step("/in/a.mp4", "/out/a.mp4") | {"status": "paused"}), "steps[0].status: 'paused' is not one of"),
        # a remix of a step that runs after it (job-insert-step moved it): job-run would not find its file
        (job(step("/out/b-j-1.mp4", "/out/a.mp4"), step("/in/b.mp4", "/out/b.mp4")), "is the output of step 1"),
        (b"[]", "the job file must be a JSON object"),
        (b"{", "the job file is not JSON"),
    ],
)
def test_what_the_farm_would_not_do_as_job_run_does_is_refused_with_the_reason(raw: bytes, said: str) -> None:
    problems = refusal(raw, "j")
    assert any(said in problem for problem in problems), problems


def test_every_problem_is_told_at_once() -> None:
    raw = job(
        step("/in/a.mp4", "/out/a.mp4", log_level="debug"), step("/in/b.mp4", "/out/b.mp4", face_swaper_model="x")
    )
    problems = refusal(raw)
    assert [problem.split(":")[0] for problem in problems] == [
        "steps[0].args.log_level",
        "steps[1].args.face_swaper_model",
    ]


def test_an_engine_other_than_facefusion_is_given_only_what_the_user_chose() -> None:
    # GIVEN a job file's options: every one FaceFusion registers, at its default unless chosen
    options = {"face_detector_model": "yolo_face", "face_mask_types": ["box"], "face_selector_mode": "many",
               "output_video_quality": 80, "face_enhancer_blend": 80}  # fmt: skip
    # THEN the built-in engine keeps what it applies (the selector, the fleet's output options) and what was
    # chosen, and FaceFusion's defaults of the rest are left out (its engine check refuses what is left)
    assert without_defaults(options, honoured("classic")) == {"face_selector_mode": "many", "output_video_quality": 80}
    assert without_defaults({"face_enhancer_blend": 50}, honoured("classic")) == {"face_enhancer_blend": 50}


def test_steps_naming_one_output_are_read_as_a_join_in_step_order() -> None:
    # GIVEN steps 0 and 2 writing one output (job-run joins their videos there) and a remix of step 0
    raw = job(step("/in/a.mp4", "/out/a.mp4"), step("/out/a-j-0.mp4", "/out/b.mp4"), step("/in/c.mp4", "/out/a.mp4"))
    found = read_job_file(raw, "j")
    # THEN the join names its steps in order, and the remix starts from step 0's own render
    assert found.joins == {"/out/a.mp4": (0, 2)}
    assert found.root(found.steps[1]).index == 0 and found.root(found.steps[2]).index == 2


def _person(target: str, output: str, source: str, frame: int, position: int, **options: Any) -> dict[str, Any]:
    made = step(target, output, reference_frame_number=frame, reference_face_position=position, **options)
    made["args"]["source_paths"] = [source]
    return made


def test_a_remix_chain_swapping_one_person_a_step_is_one_job_of_chained_passes() -> None:
    # GIVEN job-remix-step's chain of three: a on the face at 0 of frame 0, b on 1 of frame 4, c on 0 of frame 9
    # (with the options FaceFusion writes at their defaults: a scale of 1 scales nothing, again or not)
    shared = {"face_swapper_model": "inswapper_128", "output_video_scale": 1.0}
    raw = job(
        _person("/in/a.mp4", "/out/one.mp4", "/in/a.png", 0, 0, **shared),
        _person("/out/one-myjob-0.mp4", "/out/two.mp4", "/in/b.png", 4, 1, **shared),
        _person("/out/two-myjob-1.mp4", "/out/three.mp4", "/in/c.png", 9, 0, **shared),
    )
    found = read_job_file(raw, "myjob")
    # WHEN the last step's chain is read as passes
    chained = chain_as_faces(found, found.steps[2])
    # THEN it is one job on the first step's target, its people in step order, each naming frame and face
    assert chained is not None
    assert (chained.steps, chained.target) == ((0, 1, 2), "/in/a.mp4")
    assert [(p.sources, p.frame, p.position) for p in chained.people] == [
        (("/in/a.png",), 0, 0),
        (("/in/b.png",), 4, 1),
        (("/in/c.png",), 9, 0),
    ]
    # AND the shared options are the job's, without the people's own
    assert dict(chained.options) == shared
    # AND the step in the middle is a chain of its own, a first step none
    second = chain_as_faces(found, found.steps[1])
    assert second is not None and second.steps == (0, 1)
    assert chain_as_faces(found, found.steps[0]) is None


@pytest.mark.parametrize(
    ("first", "then", "said"),
    [
        # a scale of the scaled video; a rate of the re-timed one: the frames a pass gets would change
        ({"output_video_scale": 0.5}, {"output_video_scale": 0.5}, "step 0 sets output_video_scale"),
        ({}, {"output_video_fps": 12.5}, "step 1 sets output_video_fps"),
        # its sources are a voice; the enhancer's larger frames would go to the next pass
        ({"processors": ["lip_syncer"]}, {"processors": ["lip_syncer"]}, "step 0 runs the lip syncer"),
        ({"processors": ["frame_enhancer"]}, {}, "step 0 runs the frame enhancer"),
    ],
)
def test_a_remix_chain_that_changes_frames_between_steps_stays_successive_jobs(
    first: dict[str, Any], then: dict[str, Any], said: str
) -> None:
    raw = job(
        _person("/in/a.mp4", "/out/one.mp4", "/in/a.png", 0, 0, **first),
        _person("/out/one-myjob-0.mp4", "/out/two.mp4", "/in/b.png", 0, 1, **then),
    )
    found = read_job_file(raw, "myjob")
    assert chain_as_faces(found, found.steps[1]) is None
    assert said in str(chain_refusal(found, found.steps[1]))


def test_steps_with_options_of_their_own_are_passes_each_with_its_step_options() -> None:
    # GIVEN swap, then enhance: the remix step enhances the face at 0 of its target's frame 2
    swap = {"processors": ["face_swapper"], "output_video_quality": 60}
    enhance = {"processors": ["face_enhancer"], "face_enhancer_blend": 80, "output_video_quality": 90}
    raw = job(
        _person("/in/a.mp4", "/out/one.mp4", "/in/a.png", 0, 0, **swap),
        _person("/out/one-myjob-0.mp4", "/out/two.mp4", "/in/b.png", 2, 0, **enhance),
    )
    found = read_job_file(raw, "myjob")
    chained = chain_as_faces(found, found.steps[1])
    # THEN it is one job of two passes, each with its step's options (less the person's own fields)
    assert chained is not None and chained.steps == (0, 1)
    first, second = chained.people
    assert first.options is not None and dict(first.options)["processors"] == ["face_swapper"]
    assert second.options is not None and dict(second.options)["face_enhancer_blend"] == 80
    assert "reference_frame_number" not in dict(second.options) and (second.frame, second.position) == (2, 0)
    # AND the job's options are the last step's: its output is the job's (encoded at its quality)
    assert dict(chained.options)["output_video_quality"] == 90


def test_trims_compose_into_the_jobs_range_and_later_steps_count_frames_from_it() -> None:
    # GIVEN step 0 trimmed to 10..200 and step 1 to its own 5..50, naming frame 3 of its (trimmed) target
    raw = job(
        _person("/in/a.mp4", "/out/one.mp4", "/in/a.png", 12, 0, trim_frame_start=10, trim_frame_end=200),
        _person("/out/one-myjob-0.mp4", "/out/two.mp4", "/in/b.png", 3, 1, trim_frame_start=5, trim_frame_end=50),
        _person("/out/two-myjob-1.mp4", "/out/three.mp4", "/in/c.png", 0, 0),
    )
    found = read_job_file(raw, "myjob")
    chained = chain_as_faces(found, found.steps[2])
    assert chained is not None
    # THEN the job renders the original's 15..60 (step 1's 5..50 of a video starting at frame 10)
    assert (dict(chained.options)["trim_frame_start"], dict(chained.options)["trim_frame_end"]) == (15, 60)
    # AND each step's reference frame is the original's: step 0 numbers the original, step 1 from 10, step 2 from 15
    assert [person.frame for person in chained.people] == [12, 13, 15]
    # AND no pass trims again
    assert all("trim_frame_start" not in dict(person.options or {}) for person in chained.people)


def test_steps_picking_faces_otherwise_than_by_a_reference_are_passes_too() -> None:
    one = {"face_selector_mode": "one"}
    raw = job(
        _person("/in/a.mp4", "/out/one.mp4", "/in/a.png", 0, 0, **one),
        _person("/out/one-myjob-0.mp4", "/out/two.mp4", "/in/b.png", 0, 0, **one),
    )
    found = read_job_file(raw, "myjob")
    chained = chain_as_faces(found, found.steps[1])
    assert chained is not None and all(dict(p.options or {})["face_selector_mode"] == "one" for p in chained.people)
