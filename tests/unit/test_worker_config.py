"""Worker settings: argument > environment > default, read once at the entry point."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from fusionfleet.environment import settings as table
from fusionfleet.jobs.cost import GpuPrices
from gpu_worker import config
from gpu_worker.__main__ import main
from gpu_worker.errors import ConfigError


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    config.add_arguments(parser)
    return parser.parse_args(list(argv))


ENV: dict[str, str] = {table.FUSIONFLEET_QUEUE_URLS: "https://q/high,https://q/low", table.AWS_REGION: "eu-west-1"}


def test_the_environment_fills_in_what_the_arguments_leave_out() -> None:
    settings = config.resolve(
        parse("--region", "us-east-1"), {**ENV, table.FUSIONFLEET_FAULTS_FILE: "/tmp/faults.json"}
    )
    assert settings.queue_urls == ("https://q/high", "https://q/low")
    assert settings.region == "us-east-1"
    assert settings.faults_file == Path("/tmp/faults.json")
    assert settings.role == "render" and settings.isolation == "process"


def test_the_render_process_gets_its_settings_from_the_worker_config() -> None:
    settings = config.resolve(parse("--name", "w1", "--preload-engine", "classic"), dict(ENV))
    host = config.host_config(settings)
    assert (host.worker_name, host.preload_engine, host.region) == ("w1", "classic", "eu-west-1")
    assert host.faults_file is None


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({table.AWS_REGION: "eu-west-1"}, "no queue"),
        ({table.FUSIONFLEET_QUEUE_URLS: "https://q/high"}, "no region"),
    ],
)
def test_a_missing_setting_is_a_config_error(env: dict[str, str], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        config.resolve(parse(), env)


def test_the_entry_point_reports_a_config_error_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in (table.FUSIONFLEET_QUEUE_URLS, table.AWS_REGION, table.AWS_DEFAULT_REGION):
        monkeypatch.delenv(name, raising=False)
    assert main(["--region", "eu-west-1"]) == 2
    assert "no queue: pass --queue-url or set FUSIONFLEET_QUEUE_URLS" in capsys.readouterr().err


def test_the_gpu_prices_come_from_the_environment_with_a_default_and_are_checked() -> None:
    # GIVEN no price, a price, and two bad ones
    assert config.resolve(parse(), dict(ENV)).prices == GpuPrices(on_demand=1.006)
    assert config.resolve(parse(), {**ENV, table.FUSIONFLEET_GPU_HOURLY_PRICE: "0.526"}).prices.on_demand == 0.526
    spot = config.resolve(parse(), {**ENV, table.FUSIONFLEET_GPU_SPOT_HOURLY_PRICE: "0.31"}).prices
    assert spot.hourly("spot") == 0.31 and spot.hourly("on-demand") == pytest.approx(1.006)
    for name in (table.FUSIONFLEET_GPU_HOURLY_PRICE, table.FUSIONFLEET_GPU_SPOT_HOURLY_PRICE):
        for bad in ("cheap", "-1", "nan"):
            # THEN a bad price stops the worker at start with the variable's name
            with pytest.raises(ConfigError, match=name):
                config.resolve(parse(), {**ENV, name: bad})


def test_the_capacity_type_is_named_or_read_from_the_hosts_file(tmp_path: Path) -> None:
    assert config.resolve(parse(), dict(ENV)).capacity == "on-demand"
    assert config.resolve(parse(), {**ENV, table.FUSIONFLEET_CAPACITY_TYPE: "spot"}).capacity == "spot"
    written = tmp_path / "instance-life-cycle"
    written.write_text("spot\n")
    assert config.resolve(parse(), {**ENV, table.FUSIONFLEET_CAPACITY_FILE: str(written)}).capacity == "spot"
    with pytest.raises(ConfigError, match=table.FUSIONFLEET_CAPACITY_TYPE):
        config.resolve(parse(), {**ENV, table.FUSIONFLEET_CAPACITY_TYPE: "reserved-ish"})
    with pytest.raises(ConfigError, match=table.FUSIONFLEET_CAPACITY_FILE):
        config.resolve(parse(), {**ENV, table.FUSIONFLEET_CAPACITY_FILE: str(tmp_path / "missing")})


def test_a_facefusion_worker_whose_gpu_fails_its_proof_does_not_start(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a render worker that preloads FaceFusion, on a host whose CUDA falls back to the CPU
    from gpu_worker.engines.base import EngineUnavailable
    from gpu_worker.engines.facefusion import startup

    def broken(env: object) -> str:
        raise EngineUnavailable("onnxruntime's CUDAExecutionProvider is listed but a session fell back to CPU")

    monkeypatch.setattr(startup, "check_accelerator", broken)
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    # WHEN it starts THEN it exits 3 at once with the reason, before polling any queue
    assert main(["--preload-engine", "facefusion"]) == 3
    assert "cannot start: onnxruntime's CUDAExecutionProvider is listed" in capsys.readouterr().err
