"""The local autoscaler over moto's SQS and S3: a burst grows the fleet to its maximum, idleness
shrinks it to the minimum, and scale-in stops only workers whose presence record says idle."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

from fleetctl.local.autoscaler import AutoscalerSettings, run
from fusionfleet import layout
from fusionfleet.adapters.queues import SqsQueue
from fusionfleet.adapters.storage import S3Storage
from fusionfleet.fleet.autoscale import ScalingPolicy
from fusionfleet.messages import WorkerBeat
from tests.integration.conftest import Aws


class FakePool:
    """Workers by name; `busy` ones write a presence record holding a segment, the others an idle one."""

    def __init__(self, storage: S3Storage) -> None:
        self.storage = storage
        self.names: list[str] = []
        self.stopped: list[str] = []
        self.busy: set[str] = set()
        self.started = 0

    @property
    def running(self) -> list[str]:
        return list(self.names)

    @property
    def stopping_names(self) -> list[str]:
        return []

    def reap(self) -> list[str]:
        return []

    def start(self) -> str:
        self.started += 1
        name = f"worker-{self.started}"
        self.names.append(name)
        return name

    def beat(self) -> None:
        for name in self.names:
            current = "job:0" if name in self.busy else None
            record = WorkerBeat(name=name, role="render", current=current, last_beat=time.time())
            self.storage.put_bytes("work", layout.worker_key(name), record.model_dump_json().encode())

    def stop(self, name: str) -> None:
        self.names.remove(name)
        self.stopped.append(name)

    def stop_all(self, grace_s: float) -> None:
        for name in list(self.names):
            self.stop(name)


def wait_for(condition: Callable[[], bool], timeout_s: float, pool: FakePool) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pool.beat()
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_a_burst_grows_the_fleet_and_idleness_shrinks_it_stopping_only_idle_workers(aws: Aws, tmp_path: Path) -> None:
    # GIVEN an autoscaler of 1..4 workers, one segment per worker, short cooldowns
    storage = S3Storage(aws.s3)
    pool = FakePool(storage)
    urls = (aws.queues["RenderQueueHigh"], aws.queues["RenderQueueNormal"], aws.queues["RenderQueueLow"])
    status = tmp_path / "autoscaler.json"
    settings = AutoscalerSettings(
        policy=ScalingPolicy(1, 4, backlog_per_worker=1, scale_out_cooldown_s=0.2, scale_in_cooldown_s=0.5),
        queue_urls=urls,
        work_bucket="work",
        status_file=status,
        log_dir=tmp_path,
        every_s=0.1,
    )
    stop = threading.Event()
    loop = threading.Thread(target=run, args=(settings, SqsQueue(aws.sqs), storage, pool, stop), daemon=True)
    loop.start()
    try:
        # THEN it starts at the minimum
        assert wait_for(lambda: pool.running == ["worker-1"], 5, pool)
        # WHEN a burst of 10 segments waits
        for index in range(10):
            aws.sqs.send_message(QueueUrl=urls[index % 3], MessageBody=json.dumps({"segment": index}))
        # THEN the fleet grows to its maximum, and the status file says so
        assert wait_for(lambda: len(pool.running) == 4, 5, pool), pool.running
        assert wait_for(lambda: status.exists() and json.loads(status.read_text())["desired"] == 4, 5, pool)
        # WHEN the queues empty while two workers still hold a segment each (in flight: counted)
        for url in urls:
            aws.sqs.purge_queue(QueueUrl=url)
        pool.busy = {"worker-2", "worker-3"}
        # THEN only the idle workers are stopped: the two busy ones keep running
        assert wait_for(lambda: set(pool.stopped) == {"worker-1", "worker-4"}, 5, pool), pool.stopped
        time.sleep(1.0)
        assert set(pool.running) == {"worker-2", "worker-3"}
        # WHEN they finish THEN the fleet returns to the minimum
        pool.busy = set()
        assert wait_for(lambda: len(pool.running) == 1, 5, pool), pool.running
        # (the status record is written once a round: the round after the stop says so)
        assert wait_for(lambda: json.loads(status.read_text())["current"] == 1, 5, pool), status.read_text()
        record = json.loads(status.read_text())
        assert (record["current"], record["desired"], record["minimum"], record["maximum"]) == (1, 1, 1, 4)
    finally:
        stop.set()
        loop.join(timeout=10)
    # AND a stop warm-stops every worker and removes the status file
    assert pool.running == [] and not status.exists()
