"""What notices say: the preview's layout, failed segments named with their attempts,
and subjects within SNS's 100-character limit for the longest job id."""

from __future__ import annotations

import json
import re
from pathlib import Path

import cv2
import numpy as np
import pytest

from fusionfleet import layout
from fusionfleet.adapters.notify import SUBJECT_LIMIT, SUBJECT_WORDS, notice_subject, subject_line
from fusionfleet.jobs.failures import segment_failure, segment_label
from fusionfleet.jobs.ids import job_id
from fusionfleet.jobs.states import NoticeStatus
from fusionfleet.services.slicing import Slicer
from gpu_worker.merging.preview import cell_size, contact_sheet, encode_jpeg, sample_frames
from tests.support.fakes import FakeNotifier, FakeOrchestrator, FakeStorage
from tests.support.jobs import slicer_config

ROOT = Path(__file__).resolve().parents[2]
ASL = ROOT / "infra" / "statemachine" / "render.asl.json"
# The longest job id identity.job_id can build: a manifest name slugged to its limit, a dash and the hash.
LONGEST_JOB_ID = job_id("media", "jobs/" + "a" * 900 + ".json", "etag")


# ---------------------------------------------------------------- preview


@pytest.mark.parametrize(
    ("frame_count", "expected"), [(100, (12, 37, 62, 87)), (4, (0, 1, 2, 3)), (2, (0, 1)), (1, (0,)), (0, ())]
)
def test_preview_frames_are_spread_evenly_and_never_repeat(frame_count: int, expected: tuple[int, ...]) -> None:
    assert sample_frames(frame_count, 4) == expected


def test_cells_are_at_most_320_wide_and_keep_the_aspect() -> None:
    assert cell_size(1920, 1080) == (320, 180)
    assert cell_size(240, 320) == (240, 320)


def test_the_sheet_is_two_columns_by_one_row_per_pair_of_equal_cells() -> None:
    # GIVEN three (before, after) pairs, the after pictures at another size
    before = np.full((90, 160, 3), 40, np.uint8)
    after = np.full((180, 320, 3), 200, np.uint8)
    # WHEN they are laid out in 160×90 cells
    sheet = contact_sheet([(before, after)] * 3, (160, 90))
    # THEN the sheet is 2 cells wide and 3 high, the before pictures on the left
    assert sheet.shape == (270, 320, 3)
    assert int(sheet[:, :160].mean()) == 40 and int(sheet[:, 160:].mean()) == 200
    # AND its JPEG decodes to the same size
    decoded = cv2.imdecode(np.frombuffer(encode_jpeg(sheet), np.uint8), cv2.IMREAD_COLOR)
    assert decoded is not None and decoded.shape == sheet.shape


def test_the_preview_lies_beside_the_output() -> None:
    assert layout.preview_key("outputs/alice.mp4") == "outputs/alice.preview.jpg"
    assert layout.preview_key("outputs/v1.2/clip") == "outputs/v1.2/clip.preview.jpg"


# ---------------------------------------------------------------- failures


def test_a_failed_segment_is_named_with_its_frames_attempts_and_cause() -> None:
    label = segment_label(3, 300, 400)
    assert segment_failure(label, 3, "EngineCrashed", "killed by signal 9") == (
        "segment 3 (frames 300-399) failed after 3 attempts: EngineCrashed: killed by signal 9"
    )
    assert segment_failure(segment_label(0), 1, "", "no output") == "segment 0 failed after 1 attempt: no output"


# ---------------------------------------------------------------- subjects


def test_the_longest_job_id_is_80_characters() -> None:
    assert len(LONGEST_JOB_ID) == 80


@pytest.mark.parametrize("status", sorted(SUBJECT_WORDS))
def test_code_subjects_fit_sns_with_the_longest_job_id_and_keep_it_whole(status: NoticeStatus) -> None:
    subject = notice_subject(LONGEST_JOB_ID, status)
    assert len(subject) <= SUBJECT_LIMIT
    if status != "cancelled":
        assert LONGEST_JOB_ID in subject
    assert subject.startswith("FusionFleet ") and subject.endswith(SUBJECT_WORDS[status])


def test_a_subject_that_would_overflow_is_shortened_not_cut_off() -> None:
    subject = notice_subject("x" * 200, "failed")
    assert len(subject) == SUBJECT_LIMIT and subject.endswith("... failed")
    assert subject_line("é" * 150) == "?" * 100


def _subjects(node: object) -> list[str | tuple[str, list[str]]]:
    """Every Subject of the state machine: a literal, or a States.Format template and its arguments."""
    found: list[str | tuple[str, list[str]]] = []
    if isinstance(node, dict):
        for name, value in node.items():
            if name == "Subject":
                found.append(str(value))
            elif name == "Subject.$":
                match = re.fullmatch(r"States\.Format\('([^']*)',\s*(.*)\)", str(value))
                assert match, f"a subject the test cannot bound: {value}"
                found.append((match.group(1), [a.strip() for a in match.group(2).split(",")]))
            else:
                found.extend(_subjects(value))
    elif isinstance(node, list):
        for item in node:
            found.extend(_subjects(item))
    return found


def test_every_subject_in_the_state_machine_fits_sns_with_the_longest_job_id() -> None:
    # GIVEN every Subject the state machine publishes with
    subjects = _subjects(json.loads(ASL.read_text()))
    assert len(subjects) >= 2
    for subject in subjects:
        if isinstance(subject, str):
            text = subject
        else:
            template, arguments = subject
            # WHEN each argument is the longest value it can hold (only the job id is allowed)
            assert set(arguments) == {"$.job.job_id"}, arguments
            text = template.replace("{}", LONGEST_JOB_ID)
        # THEN the subject is within SNS's limit
        assert len(text) <= SUBJECT_LIMIT, text


def test_code_that_publishes_uses_the_bounded_subject() -> None:
    # GIVEN the modules that publish notices
    for module in ("fusionfleet/services/slicing.py", "fusionfleet/jobs/final_notice.py"):
        source = (ROOT / module).read_text()
        # THEN each builds its subject with notice_subject, never by formatting the job id itself
        assert "notice_subject(" in source, module
        assert not re.search(r"publish\([^)]*f\"", source), module


def test_the_slicers_rejection_of_the_longest_job_id_has_a_subject_that_fits() -> None:
    # GIVEN a manifest whose name makes the longest job id, with a bad option
    storage = FakeStorage()
    key = "jobs/" + "a" * 900 + ".json"
    manifest = {"version": 1, "source": ["inputs/f.jpg"], "target": "inputs/c.mp4", "options": {"nope": 1}}
    storage.put_bytes("media", key, json.dumps(manifest).encode())
    notifier = FakeNotifier()
    slicer = Slicer(storage, FakeOrchestrator(), notifier, slicer_config("work", "arn:sm", "arn:topic"))
    # WHEN the slicer rejects it
    assert slicer.handle("media", key).status == "rejected"
    # THEN the notice's subject names the whole job id and fits SNS's limit
    ((_topic, subject, notice),) = notifier.published
    assert len(notice["job_id"]) == 80 and notice["job_id"] in subject
    assert len(subject) <= SUBJECT_LIMIT and subject.endswith(" failed")


# ---------------------------------------------------------------- the state machine's notices


def test_a_failed_render_still_reaches_the_gate_so_its_notice_names_the_segments() -> None:
    # GIVEN the state machine
    states = json.loads(ASL.read_text())["States"]
    # THEN a Map that fails (AWS stops it at the first failed segment) goes on to the merge, whose gate
    # names each segment that did not render; the merge's failure becomes the failure notice
    (render_catch,) = states["RenderSegments"]["Catch"]
    # (through the merge service's wake, whose every way out is the merge: test_state_machine.py runs it)
    assert render_catch["ErrorEquals"] == ["States.ALL"] and render_catch["Next"] == "WakeMergeService"
    wake = ("ReadMergeService", "WakeMerge")
    assert all(states[name]["Catch"][0]["Next"] == "Merge" for name in wake)
    (merge_catch,) = states["Merge"]["Catch"]
    assert merge_catch["ResultPath"] == "$.failure"
    # (through the stage it failed at, then a Choice that gives a failure without a Cause one:
    # test_state_machine.py runs that path)
    stage = states[merge_catch["Next"]]
    assert (stage["Result"], stage["ResultPath"]) == ("merge", "$.failed_stage")
    assert {c["Next"] for c in states[stage["Next"]]["Choices"]} == {"MergeFailed"}
    notice = states["MergeFailed"]["Parameters"]
    assert (notice["error.$"], notice["reason.$"], notice["stage.$"]) == (
        "$.failure.Error", "$.failure.Cause", "$.failed_stage",
    )  # fmt: skip
    # (through the claim of the notice record, and past a batch's quiet item: test_state_machine.py runs that path)
    quiet = states[states[states["MergeFailed"]["Next"]]["Next"]]["Next"]
    assert states[quiet]["Default"] == "NotifyFailure"


def test_a_failed_content_analysis_ends_in_the_failure_notice_at_its_own_stage() -> None:
    # GIVEN the state machine WHEN a job's analysis step fails (refused, dead-lettered, timed out)
    states = json.loads(ASL.read_text())["States"]
    for level in ("High", "Normal", "Low"):
        (catch,) = states[f"Analyse{level}"]["Catch"]
        assert (catch["ErrorEquals"], catch["ResultPath"]) == (["States.ALL"], "$.failure")
        # THEN the notice names the analysis as the stage, and no segment is sent (the Map is not reached)
        stage = states[catch["Next"]]
        assert (stage["Result"], stage["ResultPath"]) == ("analysis", "$.failed_stage")
        assert stage["Next"] == "FailureHasCause" and states[f"Analyse{level}"]["Next"] == "RenderSegments"


def test_the_success_notice_keeps_its_fields_and_adds_the_preview_and_the_cost() -> None:
    notice = json.loads(ASL.read_text())["States"]["SuccessNotice"]["Parameters"]
    assert {"output.$", "download_url.$", "frames.$", "duration_s.$", "audio_tracks.$", "timings"} <= set(notice)
    # The link's true end travels with it: a role session may end it before 24 h (fusionfleet.adapters.links).
    assert notice["download_url_expires_at.$"] == "$.merge.download_url_expires_at"
    assert (notice["cost.$"], notice["preview.$"]) == ("$.merge.cost", "$.merge.preview")
