"""Write every stand-in model into MODELS_DIR (FaceFusion's .assets/models); print their paths as JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fleetctl.harness.standins import faces, portrait, processors, swappers


def build(models: Path) -> list[str]:
    models.mkdir(parents=True, exist_ok=True)
    for family in (faces, swappers, portrait, processors):
        family.build(models)
    return sorted(str(path.relative_to(models)) for path in models.rglob("*") if path.suffix in {".onnx", ".dfm"})


if __name__ == "__main__":
    print(json.dumps(build(Path(sys.argv[1]))))
