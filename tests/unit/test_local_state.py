"""Whether a pid recorded by `local up` is still the process it started."""

from __future__ import annotations

import subprocess
import sys

from fleetctl.local.state import ManagedProcess, is_ours

RUNNING = "4979 (python3.11) S 1 4979 4979 0 -1 4194560"
ZOMBIE = "4979 (python3.11) Z 1 4979 4979 0 -1 4194560"


def test_a_process_whose_command_line_names_it_is_ours() -> None:
    assert is_ours(b"python\0-m\0infra.emulators.api_gateway\0--name\0api\0", RUNNING, b"api")


def test_a_recycled_pid_running_something_else_is_not_ours() -> None:
    assert not is_ours(b"sleep\x00100\x00", RUNNING, b"api")


def test_a_zombie_is_not_alive_even_with_our_command_line() -> None:
    assert not is_ours(b"", ZOMBIE, b"api")
    assert not is_ours(b"python\0--name\0api\0", ZOMBIE, b"api")


def test_a_process_still_inside_exec_is_alive() -> None:
    # Right after Popen returns, /proc/<pid>/cmdline can still be empty; treating that as dead made
    # `local up` report "the api exited at start" for an API that was starting normally.
    assert is_ours(b"", RUNNING, b"api")


def test_a_started_process_is_alive_until_it_has_exited() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "--name", "probe-api"])
    process = ManagedProcess("api", "probe-api", child.pid, "api.log")
    try:
        assert process.alive()  # at once, as `local up` checks: exec may not have shown its arguments yet
    finally:
        child.kill()
        child.wait()
    assert not process.alive()
