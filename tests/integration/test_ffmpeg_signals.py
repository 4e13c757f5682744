"""A signal sent to the worker's process group reaches the worker, not the ffmpeg it runs.

The soak run found a warm stop (SIGTERM to the worker's group) killing the encoder under the engine,
which failed the attempt ("ffmpeg stopped reading frames") instead of checkpointing it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import av

CHILD = textwrap.dedent(
    """
    import signal, sys, time
    from pathlib import Path
    import numpy as np
    from fusionfleet.media.runner import FramePipe

    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    output = Path(sys.argv[1])
    args = ["-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "bgr24", "-s", "64x48", "-r", "25", "-i", "-",
            "-c:v", "libx264", "-pix_fmt", "yuv420p", "-y", str(output)]
    frame = np.zeros((48, 64, 3), np.uint8)
    with FramePipe(args, "test", timeout_s=60) as pipe:
        print("ready", flush=True)
        for index in range(50):
            pipe.write(frame)
            time.sleep(0.02)
    print("stopped by signal" if stopping else "not signalled", flush=True)
    """
)


def test_a_sigterm_to_the_workers_group_leaves_its_encoder_running(tmp_path: Path) -> None:
    # GIVEN a process in its own group writing frames to ffmpeg, as a worker's engine does
    output = tmp_path / "out.mp4"
    process = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(output)], stdout=subprocess.PIPE, text=True, start_new_session=True,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    # WHEN its whole process group gets SIGTERM mid-encode (a terminal's Ctrl-C does the same with SIGINT)
    os.killpg(process.pid, signal.SIGTERM)
    out, _ = process.communicate(timeout=60)
    # THEN the process saw the signal, and its encoder still finished every frame
    assert process.returncode == 0 and "stopped by signal" in out
    with av.open(str(output)) as container:
        assert sum(1 for _ in container.decode(video=0)) == 50
