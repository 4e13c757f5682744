"""One worker per GPU: the launcher gives each child its own GPU and name, and stops them together."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gpu_worker import __main__ as worker_main
from gpu_worker.lifecycle import per_gpu
from gpu_worker.lifecycle.per_gpu import Gpu, Launcher
from gpu_worker.lifecycle.stopping import StopSignal
from tests.support.template import load_template

SMI = """0, GPU-1111aaaa-0000-0000-0000-000000000000
1, GPU-2222bbbb-0000-0000-0000-000000000000
2, GPU-3333cccc-0000-0000-0000-000000000000
3, GPU-4444dddd-0000-0000-0000-000000000000
"""

# A stand-in worker: records the GPU it may see and its name, then waits for a signal like the
# real worker's warm stop (or fails at once when told to).
CHILD = """
import json, os, signal, sys, time
name = sys.argv[sys.argv.index("--name") + 1]
out = os.environ["PER_GPU_OUT"]
with open(os.path.join(out, name + ".json"), "w") as f:
    json.dump({"gpus": os.environ["CUDA_VISIBLE_DEVICES"], "argv": sys.argv[1:]}, f)
if os.environ.get("PER_GPU_FAIL") == name:
    sys.exit(3)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
time.sleep(60)
sys.exit(9)
"""


def test_each_gpu_gets_one_worker_named_after_it() -> None:
    gpus = per_gpu.parse_gpus(SMI + "garbage line\n")
    assert [gpu.index for gpu in gpus] == ["0", "1", "2", "3"]
    children = per_gpu.plan_children(gpus, "host-a")
    assert [child.name for child in children] == ["host-a-gpu0", "host-a-gpu1", "host-a-gpu2", "host-a-gpu3"]
    # Each child sees exactly its own GPU, by UUID.
    assert [child.env({}, "CUDA_VISIBLE_DEVICES") for child in children][1] == {
        "CUDA_VISIBLE_DEVICES": "GPU-2222bbbb-0000-0000-0000-000000000000"
    }
    assert children[0].argv(["w", "--name", "given"])[-2:] == ["--name", "host-a-gpu0"]


def test_cuda_visible_devices_narrows_the_gpus_by_index_or_uuid_in_its_order() -> None:
    gpus = per_gpu.parse_gpus(SMI)
    assert [gpu.index for gpu in per_gpu.visible(gpus, ["3", "GPU-2222bbbb-0000-0000-0000-000000000000"])] == [
        "3",
        "1",
    ]
    assert per_gpu.visible(gpus, [""]) == gpus
    assert per_gpu.visible(gpus, ["7"]) == []


def _launcher(tmp_path: Path, gpus: list[Gpu], **env: str) -> Launcher:
    children = per_gpu.plan_children(gpus, "h")
    command = [sys.executable, "-c", CHILD, "--role", "render"]
    full_env = {**os.environ, "PER_GPU_OUT": str(tmp_path), **env}
    return Launcher(children, command, full_env, "CUDA_VISIBLE_DEVICES", poll_s=0.05)


def _wait_for(paths: list[Path], timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while not all(path.exists() for path in paths):
        assert time.monotonic() < deadline, f"children never started: {paths}"
        time.sleep(0.05)


def test_a_stop_reaches_every_worker_and_the_launcher_exits_clean(tmp_path: Path) -> None:
    gpus = per_gpu.parse_gpus(SMI)[:2]
    launcher = _launcher(tmp_path, gpus)
    records = [tmp_path / "h-gpu0.json", tmp_path / "h-gpu1.json"]

    def stop_when_started() -> None:
        _wait_for(records)
        launcher.stop(signal.SIGTERM)

    stopper = threading.Thread(target=stop_when_started)
    stopper.start()
    assert launcher.run() == 0
    stopper.join()
    seen: list[dict[str, Any]] = [json.loads(record.read_text()) for record in records]
    assert [entry["gpus"] for entry in seen] == [gpus[0].uuid, gpus[1].uuid]
    assert all(entry["argv"][:2] == ["--role", "render"] for entry in seen)


def test_one_failed_worker_stops_the_others_and_the_launcher_reports_the_failure(tmp_path: Path) -> None:
    launcher = _launcher(tmp_path, per_gpu.parse_gpus(SMI)[:3], PER_GPU_FAIL="h-gpu1")
    started = time.monotonic()
    assert launcher.run() == 3
    # The healthy ones were stopped (exit 0 on SIGTERM), not left to their 60 s sleep.
    assert time.monotonic() - started < 30


def test_the_flag_starts_one_worker_per_gpu_only_where_there_are_several(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\ncat <<'EOF'\n{SMI}EOF\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,2")
    calls: list[tuple[list[Gpu], list[str], str]] = []

    def launch(gpus: list[Gpu], argv: list[str], env: object, base: str, variable: str) -> int:
        calls.append((gpus, argv, base))
        return 0

    monkeypatch.setattr(per_gpu, "launch", launch)
    argv = ["--per-gpu", "--queue-url", "http://q", "--region", "eu-west-1", "--name", "box"]
    assert worker_main.main(argv) == 0
    assert [gpu.index for gpu in calls[0][0]] == ["0", "2"]
    assert calls[0][1] == argv and calls[0][2] == "box"
    assert per_gpu.without_flag(argv) == argv[1:]

    # With one GPU visible the worker runs itself, as without the flag.
    class OneWorker(Exception):
        pass

    def build_worker(*_: object) -> None:
        raise OneWorker

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.setattr(worker_main, "build_worker", build_worker)
    monkeypatch.setattr(StopSignal, "install", lambda self: None)
    with pytest.raises(OneWorker):
        worker_main.main(argv)
    assert len(calls) == 1


def test_on_ecs_each_render_task_reserves_one_gpu_so_a_multi_gpu_host_runs_one_worker_per_gpu() -> None:
    # ECS gives a task that reserves one GPU only that GPU (NVIDIA_VISIBLE_DEVICES) and places as
    # many such tasks on a host as it has GPUs, provided the other reservations fit: here four
    # render tasks on a g5.12xlarge (4 GPUs, 48 vCPUs, about 186 GiB registered).
    template = load_template()
    containers = template["Resources"]["RenderTaskDefinition"]["Properties"]["ContainerDefinitions"]
    gpus = [
        int(requirement["Value"])
        for container in containers
        for requirement in container.get("ResourceRequirements", [])
        if requirement["Type"] == "GPU"
    ]
    assert gpus == [1]
    memory_mib = template["Parameters"]["RenderMemoryReservation"]["Default"]
    assert 4 * memory_mib <= 186 * 1024
    cpu_units = sum(int(container.get("Cpu", 0)) for container in containers)
    assert 4 * cpu_units <= 48 * 1024
