"""`fusionfleet estimate` and `submit --confirm` on a real clip: the target probed as the slicer probes it,
the fleet and prices from the flags, the stack's parameters or the template's defaults (said which), and
nothing submitted without a yes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from fleetctl import cli, estimate_commands, submit_commands
from fleetctl.cli import main
from fleetctl.exits import Exit
from fleetctl.samples import grace_hopper_path, write_video


@pytest.fixture
def clip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # No local stack and no region: nothing to read but the files and the flags.
    monkeypatch.setenv("FUSIONFLEET_LOCAL_DIR", str(tmp_path / "no-stack"))
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "FUSIONFLEET_ENDPOINT_URL", "FUSIONFLEET_TARGET"):
        monkeypatch.delenv(name, raising=False)
    return write_video(tmp_path / "clip.mp4", seconds=4, fps=25, width=160, height=90, audio=False)


def test_estimate_states_frames_plan_gpu_time_price_and_their_sources(
    clip: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    face = str(grace_hopper_path())
    argv = ["estimate", "-s", face, "-t", str(clip), "--engine", "classic", "--trim-frame-end", "50"]
    assert main([*argv, "--workers", "2", "--gpu-hourly-price", "0.9"]) == Exit.DONE
    out = capsys.readouterr().out
    assert "160×90, 25 fps, 50 frames rendered" in out
    assert "sized for 2 worker(s) (--workers)" in out
    assert "measured: benchmarks/results/pipeline.json" in out
    assert "prices    --gpu-hourly-price (Spot priced as On-Demand)" in out
    # AND --json is one document with the same figures
    assert main([*argv, "--workers", "2", "--gpu-hourly-price", "0.9", "--json"]) == Exit.DONE
    shown = json.loads(capsys.readouterr().out)
    (item,) = shown["items"]
    assert (item["frames"], item["engine"], shown["prices"]["on_demand"]) == (50, "classic", 0.9)
    assert item["usd_on_demand"] == pytest.approx(item["gpu_s"] / 3600 * 0.9, abs=1e-6)


def test_without_a_stack_the_templates_defaults_are_used_and_said(
    clip: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["estimate", "-s", str(grace_hopper_path()), "-t", str(clip)]) == Exit.DONE
    captured = capsys.readouterr()
    assert "no stack read (no AWS region" in captured.err
    assert "sized for 4 worker(s) (the template's RenderMaxTasks)" in captured.out
    assert "engine    facefusion" in captured.out and "not measured" in captured.out
    assert "prices    template.yaml's defaults: GpuHourlyPrice 1.006" in captured.out


def test_a_stacks_parameters_win_over_the_templates(
    clip: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    parameters = {"GpuHourlyPrice": "2.5", "GpuSpotHourlyPrice": "0.8", "RenderMaxTasks": "16"}
    monkeypatch.setattr(estimate_commands, "_stack_parameters", lambda _args: (parameters, "prod"))
    assert main(["estimate", "-s", str(grace_hopper_path()), "-t", str(clip), "--json"]) == Exit.DONE
    shown = json.loads(capsys.readouterr().out)
    assert shown["workers_from"] == "stack prod's RenderMaxTasks"
    assert (shown["prices"]["on_demand"], shown["prices"]["spot"]) == (2.5, 0.8)
    assert shown["prices"]["source"].startswith("stack prod's GpuHourlyPrice 2.5")


@pytest.mark.parametrize(("answer", "submitted"), [("n\n", False), ("", False), ("yes\n", True)])
def test_submit_confirm_shows_the_estimate_and_submits_only_on_yes(
    clip: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], answer: str, submitted: bool
) -> None:
    calls: list[str] = []

    def submit(_args: object) -> int:
        calls.append("submit")
        return 0

    monkeypatch.setitem(cli.COMMANDS, "submit", submit)
    monkeypatch.setattr(submit_commands, "client_of", lambda _args: pytest.fail("reached the stack"))
    monkeypatch.setattr("sys.stdin", io.StringIO(answer))
    code = main(["submit", "--confirm", "-s", str(grace_hopper_path()), "-t", str(clip)])
    err = capsys.readouterr().err
    assert "GPU time" in err and "submit it? [y/N]" in err
    assert (calls == ["submit"]) is submitted
    assert code == (Exit.DONE if submitted else Exit.FAILED)
    assert ("not submitted" in err) is not submitted


def test_a_source_the_farm_would_refuse_is_refused_with_its_reason_before_any_estimate(
    clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a text file where a face image belongs (beside the real face)
    notes = tmp_path / "notes.txt"
    notes.write_text("not a face\n")
    face, flags = str(grace_hopper_path()), ["--workers", "2", "--gpu-hourly-price", "0.9"]
    # WHEN it is estimated THEN it is rejected (3) with the farm's reason, and no estimate is shown
    assert main(["estimate", "-s", face, "-s", str(notes), "-t", str(clip), *flags]) == Exit.REJECTED
    captured = capsys.readouterr()
    assert f"source[1] {str(notes)!r} is neither a face image" in captured.err and "a text file" in captured.err
    assert "GPU time" not in captured.out
    # AND what the engine needs of the sources is judged as the farm judges it: the lip syncer wants a voice
    assert main(["estimate", "-s", face, "-t", str(clip), "--processors", "lip_syncer", *flags]) == Exit.REJECTED
    assert "lip_syncer needs an audio file among the sources" in capsys.readouterr().err
    # AND a source that is not there is a usage error (2), as submit says it
    assert main(["estimate", "-s", str(tmp_path / "gone.png"), "-t", str(clip), *flags]) == Exit.USAGE
    assert "gone.png is not a file" in capsys.readouterr().err
