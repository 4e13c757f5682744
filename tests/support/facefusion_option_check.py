"""Run by FaceFusion's interpreter in its folder: what the warm process says to each argv, without rendering.

    python facefusion_option_check.py WARM_SERVER_PY < argvs.json > verdicts.json

For each argv (a JSON list of lists) it does what the warm process does before a segment's first
frame (warm_server.FaceFusion.configure: FaceFusion's own parser, validation and apply_args; then
pre_process of every processor the argv names) and answers `null` or the refusal's reason. The
processors' model checks are left out: which models a worker carries is image_models' business.
Standard library, numpy and FaceFusion only, like the warm process itself.

FaceFusion asks ffmpeg for its encoders each time it builds its parser (`ffmpeg -encoders`, seven times
per parse: each sub-command's program has the output options); over the walk's four hundred argvs that
was most of the check's CPU (about 2700 ffmpeg starts, some 60 of its 90 CPU seconds). The binary does
not change while this process runs, so its answer is asked once and given to every parse: the parser
FaceFusion builds, and so each verdict, is the same.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from typing import Any


def load(path: str) -> Any:
    """warm_server.py by its path: it imports nothing of the project, which this interpreter lacks, only
    the modules beside it (the wire format, the frame rings), as it does when run as a script."""
    sys.path.append(os.path.dirname(os.path.abspath(path)))
    spec = importlib.util.spec_from_file_location("warm_server", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def encoders_asked_once() -> None:
    """FaceFusion's encoder query answered from its first answer (the program module imported it by name)."""
    from facefusion import ffmpeg, program

    first = ffmpeg.get_available_encoder_set()
    assert first["video"], "FaceFusion's ffmpeg lists no video encoder"

    def answer() -> Any:
        return {kind: list(names) for kind, names in first.items()}  # a copy: a caller may change it

    ffmpeg.get_available_encoder_set = answer
    program.get_available_encoder_set = answer


def main() -> None:
    sys.path.insert(0, os.getcwd())  # FaceFusion's folder
    warm_server = load(sys.argv[1])

    argvs = json.load(sys.stdin)
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # FaceFusion's own output stays out of the answer
    sys.stderr = warm_server.ConsoleTail()
    encoders_asked_once()
    engine = warm_server.FaceFusion()
    verdicts: list[str | None] = []
    for argv in argvs:
        try:
            engine.configure(argv)
            engine.pre_process()
            verdicts.append(None)
        except warm_server.Refused as refusal:
            verdicts.append(str(refusal) or "refused")
        except Exception as error:  # a crash on an accepted option is a refusal too
            verdicts.append(f"{type(error).__name__}: {error}")
    json.dump(verdicts, replies)
    replies.flush()


if __name__ == "__main__":
    main()
