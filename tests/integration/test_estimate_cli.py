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
