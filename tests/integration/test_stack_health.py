"""The e2e tier's LocalStack watch against a real HTTP server that answers, then stops answering."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.support.stack_health import HealthWatch, Misses, probe


class Health(BaseHTTPRequestHandler):
    hung = threading.Event()

    def do_GET(self) -> None:
        if self.hung.is_set():
            time.sleep(2)  # LocalStack out of threads: the connection opens, no answer comes
            return
        body = b'{"services": {"s3": "running"}}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    Health.hung.clear()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Health)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        Health.hung.clear()
        httpd.shutdown()
        httpd.server_close()


def test_an_answering_stack_is_healthy_and_a_hung_one_says_why(server: str) -> None:
    assert probe(server, timeout_s=1) is None
    Health.hung.set()
    reason = probe(server, timeout_s=0.3)
    assert reason is not None and "/_localstack/health did not answer within 0.3 s" in reason


def test_a_stopped_stack_is_refused_with_the_reason() -> None:
    reason = probe("http://127.0.0.1:9", timeout_s=0.5)  # discard port: nothing listens
    assert reason is not None and "Connection refused" in reason


def test_one_slow_answer_is_not_a_dead_stack_but_misses_in_a_row_are() -> None:
    misses = Misses().after("slow").after("slow").after(None).after("slow")
    assert misses.count == 1 and not misses.down(allowed=2)
    assert misses.after("gone").down(allowed=2)


def test_a_test_running_when_the_stack_stops_answering_fails_at_once_with_the_reason(server: str) -> None:
    # GIVEN a watch over a stack that answers, guarding a test that waits long for a notice
    watch = HealthWatch(server, interval_s=0.1, probe_timeout_s=0.2, misses_allowed=3)
    watch.start()
    started = time.monotonic()
    try:
        stopped = pytest.raises(pytest.fail.Exception, match="LocalStack stopped answering: 3 health checks")
        with stopped, watch.guarding():
            time.sleep(0.5)  # answered all along: nothing happens
            # WHEN the stack hangs
            Health.hung.set()
            time.sleep(30)  # stands for a test's long wait
        # THEN the test failed within a few probes, not after its wait
        assert time.monotonic() - started < 10
        # ... and the next test fails before it starts, naming the earlier reason
        with pytest.raises(pytest.fail.Exception, match="stopped answering earlier in the run"), watch.guarding():
            pass
    finally:
        watch.stop()


def test_a_stack_that_goes_down_between_tests_interrupts_nothing_then_fails_the_next(server: str) -> None:
    watch = HealthWatch(server, interval_s=0.1, probe_timeout_s=0.2, misses_allowed=2)
    watch.start()
    try:
        Health.hung.set()
        deadline = time.monotonic() + 10
        while watch.down is None and time.monotonic() < deadline:
            time.sleep(0.1)  # no test is armed: no interrupt lands here
        assert watch.down is not None
        with pytest.raises(pytest.fail.Exception, match="earlier in the run"), watch.guarding():
            pass
    finally:
        watch.stop()
