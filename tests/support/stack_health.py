"""Is LocalStack still answering? A watch that fails the running e2e test, and the rest of the tier, fast.

Without it a LocalStack that hangs (it has: on SIGTERM, and out of threads in long runs) leaves each
e2e test waiting out its own generous cap for a notice that cannot come. The watch asks the health
endpoint every few seconds from a thread; after several unanswered asks in a row the stack is down:
the test running then fails at once with the reason, and every later test that needs the stack
fails before it starts.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

import pytest

# A loaded 2-core machine can keep LocalStack from answering for a while: only this many misses in
# a row (about a minute with the defaults) mean it is gone.
MISSES_ALLOWED = 4
INTERVAL_S = 10.0
PROBE_TIMEOUT_S = 10.0


def probe(endpoint: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """None when LocalStack's health endpoint answers, else why not."""
    url = f"{endpoint.rstrip('/')}/_localstack/health"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            json.loads(response.read())
    except urllib.error.HTTPError as error:
        return f"{url} answered HTTP {error.code}"
    except urllib.error.URLError as error:  # refused, unreachable, or a connect that timed out
        return f"{url} did not answer within {timeout_s:g} s: {error.reason}"
    except (OSError, ValueError) as error:  # a read that timed out, a reset, or not JSON
        return f"{url} did not answer within {timeout_s:g} s: {type(error).__name__}: {error}"
    return None


@dataclass(frozen=True)
class Misses:
    """Unanswered asks in a row, and the last reason. Pure."""

    count: int = 0
    reason: str = ""

    def after(self, answer: str | None) -> Misses:
        return Misses() if answer is None else Misses(self.count + 1, answer)

    def down(self, allowed: int = MISSES_ALLOWED) -> bool:
        return self.count >= allowed


class HealthWatch:
    """Probes from a daemon thread; once down, stays down (a stack that hung is not trusted again)."""

    def __init__(
        self,
        endpoint: str,
        interval_s: float = INTERVAL_S,
        probe_timeout_s: float = PROBE_TIMEOUT_S,
        misses_allowed: int = MISSES_ALLOWED,
    ) -> None:
        self.endpoint = endpoint
        self._interval_s = interval_s
        self._probe_timeout_s = probe_timeout_s
        self._misses_allowed = misses_allowed
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._armed = False  # a test body is running: interrupt it when the stack goes down
        self.down: str | None = None
        self._thread = threading.Thread(target=self._run, name="localstack-health", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=self._probe_timeout_s + self._interval_s)

    @contextmanager
    def guarding(self) -> Iterator[None]:
        """Around one test: fails it fast when the stack is (or goes) down while it runs."""
        if self.down is not None:
            pytest.fail(f"LocalStack stopped answering earlier in the run: {self.down}", pytrace=False)
        previous = signal.signal(signal.SIGUSR1, self._interrupt)
        with self._lock:
            self._armed = True
        try:
            yield
        finally:
            with self._lock:
                self._armed = False
            signal.signal(signal.SIGUSR1, previous)

    def _interrupt(self, signum: int, frame: FrameType | None) -> None:
        # In the main thread, inside the test body: how pytest-timeout fails a test too.
        pytest.fail(f"LocalStack stopped answering: {self.down}", pytrace=False)

    def _run(self) -> None:
        misses = Misses()
        started = time.monotonic()
        while not self._stopped.wait(self._interval_s):
            misses = misses.after(probe(self.endpoint, self._probe_timeout_s))
            if misses.down(self._misses_allowed):
                self.down = (
                    f"{misses.count} health checks in a row unanswered, "
                    f"{time.monotonic() - started:.0f} s into the run; last: {misses.reason}"
                )
                with self._lock:
                    if self._armed:
                        os.kill(os.getpid(), signal.SIGUSR1)
                return
