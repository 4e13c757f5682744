"""The catalogue's FaceFusion defaults (the CLI's help shows them) are FaceFusion 3.8.1's own: its
`headless-run` parser, built by FaceFusion's interpreter in its checkout, says each one.

Needs FaceFusion's checkout and interpreter (tests/support/facefusion_harness.py); skipped with the
reason otherwise, failed in CI.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import imageio_ffmpeg

from fusionfleet.facefusion.catalogue import DEFAULTS
from fusionfleet.facefusion.options import CATALOGUE
from tests.support import facefusion_harness as harness

# Builds FaceFusion's parser as `facefusion.py headless-run` does and prints each option's default.
DEFAULTS_OF_HEADLESS_RUN = """
import json, sys
sys.argv = ["facefusion.py", "headless-run"]
from facefusion.program import create_program
commands = next(action for action in create_program()._actions if action.dest == "command")
print(json.dumps({action.dest: action.default for action in commands.choices["headless-run"]._actions}))
"""


def test_the_catalogues_defaults_are_facefusions(tmp_path: Path) -> None:
    harness.require()
    source = harness.source_checkout()
    assert source is not None
    # FaceFusion asks its ffmpeg which encoders there are (its encoders' defaults are the first offered)
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "ffmpeg").symlink_to(imageio_ffmpeg.get_ffmpeg_exe())
    env = {**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [str(harness.facefusion_python()), "-c", DEFAULTS_OF_HEADLESS_RUN],
        cwd=source, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    ours = {name: list(value) if isinstance(value, tuple) else value for name, value in DEFAULTS.items()}
    assert ours == {name: theirs[name] for name in CATALOGUE}
