"""The worker image's build step that holds `fusionfleet/facefusion/image_models.py` to the models it downloaded.

Run by FaceFusion's interpreter in FaceFusion's folder, with the list's file by path (the project is
not installed yet at that point of the build):

    python image_models_check.py scope  /tmp/image_models.py   # prints the download scope
    python image_models_check.py check  /tmp/image_models.py   # exit 1 unless the models folder matches
    python image_models_check.py expected /tmp/image_models.py # FaceFusion's own list for that scope (JSON)

For every option that names a model it asks FaceFusion 3.8.1 for the option's choices and each
model's files, and compares the models whose files are all present with the list: a model the list
names that the image lacks, or one the image carries that the list would refuse, fails the build.
Standard library and FaceFusion only.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

PROCESSORS = (
    "age_modifier", "background_remover", "deep_swapper", "expression_restorer", "face_editor",
    "face_enhancer", "face_swapper", "frame_colorizer", "frame_enhancer", "lip_syncer",
)  # fmt: skip
# option -> (FaceFusion's module with the option's models, its module with the option's choices, the choices' name)
OPTION_SOURCES: dict[str, tuple[str, str, str]] = {
    "face_detector_model": ("facefusion.face_detector", "facefusion.choices", "face_detector_models"),
    "face_landmarker_model": ("facefusion.face_landmarker", "facefusion.choices", "face_landmarker_models"),
    "face_occluder_model": ("facefusion.face_masker", "facefusion.choices", "face_occluder_models"),
    "face_parser_model": ("facefusion.face_masker", "facefusion.choices", "face_parser_models"),
    "voice_extractor_model": ("facefusion.voice_extractor", "facefusion.choices", "voice_extractor_models"),
    **{
        f"{name}_model": (
            f"facefusion.processors.modules.{name}.core",
            f"facefusion.processors.modules.{name}.choices",
            f"{name}_models",
        )
        for name in PROCESSORS
    },
}


def load_list(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("image_models", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _facefusion() -> None:
    sys.path.insert(0, os.getcwd())
    sys.argv = ["facefusion.py"]
    from facefusion import state_manager

    # The model sets spell their download URLs from this; nothing is downloaded here.
    state_manager.init_item("download_providers", ["github"])


def carried(scope_or_files: Callable[[Mapping[str, Any]], bool], scope: str, all_of_them: str) -> dict[str, list[str]]:
    """Per option, the choices whose models pass `scope_or_files`; the all-models choice when all do."""
    result: dict[str, list[str]] = {}
    for option, (models_module, choices_module, choices_name) in OPTION_SOURCES.items():
        models = importlib.import_module(models_module).create_static_model_set("full")
        in_scope = importlib.import_module(models_module).create_static_model_set(scope)
        choices = list(getattr(importlib.import_module(choices_module), choices_name))
        kept = [c for c in choices if c in models and scope_or_files({"model": models[c], "in_scope": c in in_scope})]
        if all_of_them in choices and len(kept) == len([c for c in choices if c in models]):
            kept.insert(choices.index(all_of_them), all_of_them)
        result[option] = kept
    return result


def _files_present(entry: Mapping[str, Any]) -> bool:
    model = entry["model"]
    files = [*model.get("hashes", {}).values(), *model.get("sources", {}).values()]
    return bool(files) and all(Path(item["path"]).is_file() for item in files)


def main() -> int:
    command, path = sys.argv[1], sys.argv[2]
    listed = load_list(path)
    if command == "scope":
        print(listed.DOWNLOAD_SCOPE)
        return 0
    _facefusion()
    if command == "expected":
        print(json.dumps(carried(lambda entry: bool(entry["in_scope"]), listed.DOWNLOAD_SCOPE, listed.ALL_OF_THEM)))
        return 0
    present = carried(_files_present, listed.DOWNLOAD_SCOPE, listed.ALL_OF_THEM)
    problems = []
    for option in sorted(set(present) | set(listed.IMAGE_MODELS)):
        have, claim = set(present.get(option, [])), set(listed.IMAGE_MODELS.get(option, ()))
        if claim - have:
            problems.append(f"{option}: listed but not in the image: {', '.join(sorted(claim - have))}")
        if have - claim:
            problems.append(f"{option}: in the image but not listed: {', '.join(sorted(have - claim))}")
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"{len(present)} model options checked, {len(problems)} differences", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
