"""`facefusion.py` for one segment of a job whose content-analysis verdict was already made.

Run by FaceFusion's interpreter in FaceFusion's folder instead of its `facefusion.py`, with the same
arguments. FaceFusion 3.8.1's `headless-run` always starts a video with `analyse_video` over the frames
it was given, so a segment would decide again from its own two or three samples what the job decided
once over the whole video with FaceFusion's own analyser, rate and threshold
(fusionfleet/facefusion/content_analysis.py). Here that one step of its video workflow reports "passed"; the
analyser module itself is untouched (FaceFusion checks its source hash) and everything else is
FaceFusion's own run. Standard library and FaceFusion only.
"""

from __future__ import annotations

import os
import sys

# As facefusion.py sets it before importing anything.
os.environ["OMP_NUM_THREADS"] = "1"


def decided() -> int:
    """The job's verdict passed (else no segment would render): FaceFusion's code for "continue"."""
    return 0


def main() -> None:
    sys.path.insert(0, os.getcwd())
    from facefusion import conda, core
    from facefusion.workflows import image_to_video

    image_to_video.analyse_video = decided  # looked up when its workflow builds its task list
    conda.setup()
    core.cli()


if __name__ == "__main__":
    main()
