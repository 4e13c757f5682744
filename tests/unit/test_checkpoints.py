"""Checkpoint keys and grids: which chunks of a segment count as done."""

from __future__ import annotations

from pathlib import Path

from fusionfleet import layout
from gpu_worker.rendering.checkpoints import Checkpoints, Chunk, done_prefix, open_state, parse_chunks, seal_state
from gpu_worker.rendering.frames import chunk_grid
from tests.support.fakes import FakeStorage

JOB = "clip-0123456789abcdef"


def test_a_segment_is_cut_on_a_fixed_grid_from_its_first_frame() -> None:
    assert chunk_grid(50, 100, 25) == [(50, 75), (75, 100)]
    assert chunk_grid(50, 110, 25) == [(50, 75), (75, 100), (100, 110)]
    assert chunk_grid(50, 100, None) == [(50, 100)]
    assert chunk_grid(50, 100, 0) == [(50, 100)]


def test_a_chunk_key_names_its_frame_range_and_parses_back() -> None:
    key = layout.chunk_key(JOB, 3, 75, 100)
    assert key == f"{layout.checkpoint_prefix(JOB, 3)}0000075-0000100.mp4"
    # GIVEN keys listed in any order, with a stray object among them
    stray = f"{layout.checkpoint_prefix(JOB, 3)}notes.txt"
    chunks = parse_chunks([key, stray, layout.chunk_key(JOB, 3, 50, 75)])
    # THEN the chunks come back sorted by frame, the stray left out
    assert chunks == [Chunk(50, 75, layout.chunk_key(JOB, 3, 50, 75)), Chunk(75, 100, key)]


def test_only_an_unbroken_run_from_the_grid_start_counts_as_done() -> None:
    grid = chunk_grid(0, 100, 25)
    chunks = parse_chunks([layout.chunk_key(JOB, 0, first, end) for first, end in [(0, 25), (25, 50), (75, 100)]])
    assert [(c.first, c.end) for c in done_prefix(chunks, grid)] == [(0, 25), (25, 50)]
    # AND chunks of another grid (the job's chunk size changed) count for nothing
    other = parse_chunks([layout.chunk_key(JOB, 0, 0, 30)])
    assert done_prefix(other, grid) == []
    assert done_prefix([], grid) == []


def test_saved_chunks_are_found_under_their_segment_and_cleared_with_it(tmp_path: Path) -> None:
    # GIVEN two chunks of segment 1 saved, and one of segment 2
    storage = FakeStorage()
    part = tmp_path / "part.mp4"
    part.write_bytes(b"chunk")
    one = Checkpoints(storage, "work", JOB, 1)
    one.save(part, 50, 75)
    one.save(part, 75, 100)
    Checkpoints(storage, "work", JOB, 2).save(part, 100, 125)
    assert storage.list_keys("work", layout.checkpoint_prefix(JOB, 1)) == [
        layout.chunk_key(JOB, 1, 50, 75),
        layout.chunk_key(JOB, 1, 75, 100),
    ]
    # WHEN segment 1 is cleared
    one.clear()
    # THEN only its chunks are gone
    assert storage.list_keys("work", layout.checkpoint_prefix(JOB, 1)) == []
    assert storage.list_keys("work", layout.checkpoint_prefix(JOB, 2)) == [layout.chunk_key(JOB, 2, 100, 125)]


def test_a_broken_first_chunk_is_not_trusted(tmp_path: Path) -> None:
    # GIVEN a saved first chunk that is not a video (a torn upload)
    storage = FakeStorage()
    storage.put_bytes("work", layout.chunk_key(JOB, 0, 0, 25), b"not a video")
    storage.put_bytes("work", layout.chunk_key(JOB, 0, 25, 50), b"not a video either")
    # WHEN the segment restores its grid
    restored = Checkpoints(storage, "work", JOB, 0).restore(chunk_grid(0, 50, 25), tmp_path)
    # THEN nothing is restored and the later chunk was never fetched
    assert restored == []
    assert layout.chunk_key(JOB, 0, 25, 50) not in storage.reads


def test_an_engine_state_opens_only_for_its_own_engine_and_format() -> None:
    # GIVEN a classic engine's state in its envelope
    sealed = seal_state("classic", b"\x00state\nbytes")
    # THEN the same engine gets its bytes back unchanged, newlines and all
    assert open_state(sealed, "classic") == b"\x00state\nbytes"
    # AND another engine, another envelope format, or bytes with no envelope resume with the lead-in
    assert open_state(sealed, "copy") is None
    assert open_state(sealed.replace(b'"format": 1', b'"format": 2'), "classic") is None
    assert open_state(b"PK\x03\x04 not an envelope", "classic") is None
