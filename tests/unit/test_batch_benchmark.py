"""The batch benchmark's judge (benchmarks/batch_media.py) and its measures (benchmarks/batch.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2

from benchmarks.batch import measures
from benchmarks.batch_media import compare, decode
from fleetctl.samples import astronaut, write_video


def test_the_judge_tells_identical_outputs_from_a_changed_frame_and_a_short_clip(tmp_path: Path) -> None:
    clip = write_video(tmp_path / "a.mp4", seconds=1, fps=25, width=96, height=64, audio=False, with_stamp=True)
    same = write_video(tmp_path / "b.mp4", seconds=1, fps=25, width=96, height=64, audio=False, with_stamp=True)
    short = write_video(tmp_path / "c.mp4", seconds=0.8, fps=25, width=96, height=64, audio=False, with_stamp=True)
    a, b, c = decode(clip), decode(same), decode(short)
    assert (a.width, a.height, a.frames) == (96, 64, 25)
    assert compare(a, b, a) == ""  # the same encode twice: the same pixels
    assert "20 frames" in compare(c, a, a)  # a frame lost is named against the target
    changed = type(a)(a.width, a.height, (*a.hashes[:-1], "0" * 64))
    assert compare(changed, a, a) == "1 of 25 frames differ from the output of the target submitted alone"


def test_the_judge_decodes_a_picture_to_one_hash_of_its_pixels(tmp_path: Path) -> None:
    picture = cv2.resize(astronaut(), (120, 90))
    assert cv2.imwrite(str(tmp_path / "p.png"), picture)
    picture[0, 0] = 255 - picture[0, 0]
    assert cv2.imwrite(str(tmp_path / "q.png"), picture)
    p, q = decode(tmp_path / "p.png"), decode(tmp_path / "q.png")
    assert (p.width, p.height, p.frames) == (120, 90, 1) and p.hashes != q.hashes
    assert compare(q, p, p) != "" and compare(p, decode(tmp_path / "p.png"), p) == ""


def _batch(states: list[str], killed: bool) -> dict[str, Any]:
    return {
        "results": [{"index": i, "state": state} for i, state in enumerate(states)],
        "kill": {"killed": killed},
        "wall_over_ideal": 1.2,
        "notices": [{"job_id": "b", "stage": "batch", "status": "succeeded"}],
    }


def test_no_item_lost_is_measured_only_when_a_worker_was_killed() -> None:
    judged = [{"identical": True}, {"identical": False}]
    found = measures(_batch(["SUCCEEDED", "FAILED"], killed=True), judged)
    assert found == {"items_succeeded": 1, "outputs_identical": 1, "wall_over_ideal": 1.2, "batch_notices": 1}
    assert measures(_batch(["SUCCEEDED"], killed=False), None)["items_succeeded"] is None
    assert measures(None, None) == {}
