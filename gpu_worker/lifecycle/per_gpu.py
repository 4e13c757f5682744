"""One worker process per GPU on a host with several: `fusionfleet-worker --per-gpu`.

A worker holds one segment at a time and renders it on one GPU, so a four-GPU host run as one
worker leaves three GPUs idle, and four workers that all see every GPU crowd onto GPU 0 (CUDA's
default device). On ECS each render task reserves one GPU and the agent shows it only that one,
so the host fills with one task per GPU by construction. A host run by hand gets the same from
this launcher: it lists the GPUs the process may see, starts one worker per GPU with
CUDA_VISIBLE_DEVICES naming only that GPU (by UUID, which stays right if indexes are renumbered),
forwards SIGTERM/SIGINT to every child (warm stop, then cold stop, as for one worker), and exits
when they have all exited. When one child fails the others are stopped warm and the launcher exits
with the failure, so the host's supervisor (systemd, a container runtime) restarts the whole set
rather than leaving a GPU idle unnoticed.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType

from gpu_worker.lifecycle import nvidia_smi

logger = logging.getLogger(__name__)

QUERY = ["--query-gpu=index,uuid", "--format=csv,noheader"]
FLAG = "--per-gpu"


@dataclass(frozen=True)
class Gpu:
    index: str
    uuid: str


@dataclass(frozen=True)
class Child:
    name: str
    gpu: Gpu

    def argv(self, command: Sequence[str]) -> list[str]:
        # Last --name wins in argparse, so the child's name overrides one given to the launcher.
        return [*command, "--name", self.name]

    def env(self, base: Mapping[str, str], gpus_variable: str) -> dict[str, str]:
        return {**base, gpus_variable: self.gpu.uuid}


def parse_gpus(output: str) -> list[Gpu]:
    """nvidia-smi's `index, uuid` lines; lines that are not two fields are skipped."""
    gpus = []
    for line in output.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) == 2 and fields[0].isdigit() and fields[1]:
            gpus.append(Gpu(index=fields[0], uuid=fields[1]))
    return gpus


def visible(gpus: Sequence[Gpu], allowed: Sequence[str]) -> list[Gpu]:
    """The GPUs CUDA_VISIBLE_DEVICES (indexes or UUIDs, in its order) lets this host use; all when empty."""
    wanted = [entry.strip() for entry in allowed if entry.strip()]
    if not wanted:
        return list(gpus)
    chosen = []
    for entry in wanted:
        for gpu in gpus:
            if entry in (gpu.index, gpu.uuid) and gpu not in chosen:
                chosen.append(gpu)
    return chosen


def plan_children(gpus: Sequence[Gpu], base_name: str) -> list[Child]:
    """One worker per GPU, named after the host's worker name and the GPU's index."""
    return [Child(name=f"{base_name}-gpu{gpu.index}", gpu=gpu) for gpu in gpus]


def without_flag(argv: Sequence[str]) -> list[str]:
    return [argument for argument in argv if argument != FLAG]


def list_gpus() -> list[Gpu]:
    """The host's GPUs from nvidia-smi; none where it is missing or does not answer."""
    output = nvidia_smi.query(QUERY)
    return [] if output is None else parse_gpus(output)


class Launcher:
    """Runs the planned children and stops them together."""

    def __init__(
        self,
        children: Sequence[Child],
        command: Sequence[str],
        env: Mapping[str, str],
        gpus_variable: str,
        spawn: Callable[..., subprocess.Popen[bytes]] = subprocess.Popen,
        poll_s: float = 0.5,
    ) -> None:
        self._children = list(children)
        self._command = list(command)
        self._env = dict(env)
        self._gpus_variable = gpus_variable
        self._spawn = spawn
        self._poll_s = poll_s
        self._processes: dict[str, subprocess.Popen[bytes]] = {}

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._forward)
        signal.signal(signal.SIGINT, self._forward)

    def run(self) -> int:
        for child in self._children:
            env = child.env(self._env, self._gpus_variable)
            self._processes[child.name] = self._spawn(child.argv(self._command), env=env)
            logger.info("started %s on GPU %s (%s)", child.name, child.gpu.index, child.gpu.uuid)
        status = 0
        while self._processes:
            for name, process in list(self._processes.items()):
                code = process.poll()
                if code is None:
                    continue
                del self._processes[name]
                logger.info("%s exited with %d", name, code)
                if code != 0 and status == 0:
                    status = code
                    # One GPU's worker is gone: stop the rest warm so the whole set restarts together.
                    self.stop(signal.SIGTERM)
            time.sleep(self._poll_s)
        return status

    def stop(self, number: int) -> None:
        for process in self._processes.values():
            if process.poll() is None:
                process.send_signal(number)

    def _forward(self, number: int, frame: FrameType | None) -> None:
        logger.info("%s: passing it to %d workers", signal.Signals(number).name, len(self._processes))
        self.stop(number)


def host_gpus(allowed: str) -> list[Gpu]:
    """The GPUs this host may use: nvidia-smi's list, narrowed by CUDA_VISIBLE_DEVICES (`allowed`)."""
    return visible(list_gpus(), allowed.split(","))


def launch(gpus: Sequence[Gpu], argv: Sequence[str], env: Mapping[str, str], base_name: str, gpus_variable: str) -> int:
    """Run one worker per GPU (`python -m gpu_worker` with `argv`) until all have exited."""
    command = [sys.executable, "-m", "gpu_worker", *without_flag(argv)]
    launcher = Launcher(plan_children(gpus, base_name), command, env, gpus_variable)
    launcher.install()
    return launcher.run()
