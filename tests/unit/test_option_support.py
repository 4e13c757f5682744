"""No accepted option is silently ignored: every FaceFusion option is applied by the job's engine (or the
fleet's encoder and merge) or refused at validation, for every engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fusionfleet.errors import JobRejected
from fusionfleet.facefusion.catalogue import CATALOGUE, OptionSpec
from fusionfleet.facefusion.image_models import IMAGE_MODELS
from fusionfleet.facefusion.options import to_cli_args, validate_options
from fusionfleet.jobs.audio import audio_encode_args, audio_settings
from fusionfleet.jobs.engine_options import ENGINE_OPTIONS, FLEET_OPTIONS, check_engine_options
from fusionfleet.jobs.manifest import ENGINE_NAMES, REFUSED_OPTIONS, parse_manifest

ROOT = Path(__file__).resolve().parents[2]
# Where each kind of option is applied; a name claimed as applied must appear in that code.
APPLIED_BY = {
    "classic": [ROOT / "gpu_worker/engines/classic", ROOT / "fusionfleet/facefusion/reference.py"],
    "fleet": [
        ROOT / "fusionfleet/jobs/encoding.py",
        ROOT / "fusionfleet/jobs/audio.py",
        ROOT / "fusionfleet/jobs/timeline.py",
        ROOT / "fusionfleet/jobs/image_output.py",
    ],
}


# Values the fleet takes where not every FaceFusion value is (encoders, built-in processors), and
# options FaceFusion only takes together.
TOGETHER: dict[str, dict[str, object]] = {
    "output_video_encoder": {"output_video_encoder": "libx264"},
    "output_audio_encoder": {"output_audio_encoder": "aac"},
    "processors": {"processors": ["face_swapper"]},
    "face_selector_age_start": {"face_selector_age_end": 100},
    "face_selector_age_end": {"face_selector_age_start": 0},
}


def sample_value(spec: OptionSpec) -> object:
    """A value FaceFusion accepts for the option (a model: one the worker image carries)."""
    if spec.name in IMAGE_MODELS:
        value: object = IMAGE_MODELS[spec.name][-1]
    elif spec.choices:
        value = spec.choices[-1]
    elif spec.kind == "int":
        value = int(spec.minimum if spec.minimum is not None else 1)
    elif spec.kind == "float":
        value = float(spec.minimum if spec.minimum is not None else 0.5)
    else:
        value = "x"
    return [value] if spec.multiple else value


def source_text(places: list[Path]) -> str:
    files = [path for place in places for path in ([place] if place.is_file() else sorted(place.rglob("*.py")))]
    return "\n".join(path.read_text() for path in files)


def verdict(engine: str, name: str) -> str:
    """'applied' or the refusal, for a manifest of `engine` setting only option `name`."""
    options = {name: sample_value(CATALOGUE[name]), **TOGETHER.get(name, {})}
    raw = json.dumps({"source": "face.png", "target": "clip.mp4", "engine": engine, "options": options}).encode()
    try:
        manifest = parse_manifest(raw, "jobs/a.json")
        check_engine_options(engine, manifest.options)
    except JobRejected as rejection:
        assert any(name in problem for problem in rejection.problems), rejection.problems
        return rejection.reason
    return "applied"


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_every_option_is_applied_or_refused_for_every_engine(engine: str) -> None:
    classic_code, fleet_code = source_text(APPLIED_BY["classic"]), source_text(APPLIED_BY["fleet"])
    for name in CATALOGUE:
        outcome = verdict(engine, name)
        if name in REFUSED_OPTIONS:
            assert outcome != "applied", f"{name} is refused for every engine"
        elif name in FLEET_OPTIONS:
            assert outcome == "applied", f"{engine}: {name}: {outcome}"
            # The fleet's encoder or merge reads it by name (not only this table).
            assert f'options.get("{name}"' in fleet_code, f"the fleet claims {name} but never reads it"
        elif name in ENGINE_OPTIONS[engine]:
            assert outcome == "applied", f"{engine}: {name}: {outcome}"
            if engine == "classic" and name != "processors":  # processors: checked by validation itself
                assert f'"{name}"' in classic_code, f"the classic engine claims {name} but never reads it"
            if engine == "facefusion":
                options = {name: sample_value(CATALOGUE[name]), **TOGETHER.get(name, {})}
                assert CATALOGUE[name].flag in to_cli_args(validate_options(options))
        else:
            assert outcome != "applied", f"{engine} accepts {name} but does not apply it"
            assert f"the {engine} engine does not apply it" in outcome


def test_a_built_in_engine_refuses_processors_it_does_not_run() -> None:
    check_engine_options("classic", {"processors": ["face_swapper"]})
    with pytest.raises(JobRejected, match="runs only face_swapper, not face_enhancer"):
        check_engine_options("classic", {"processors": ["face_swapper", "face_enhancer"]})


def test_audio_is_copied_unless_an_audio_option_is_set() -> None:
    assert audio_settings({"face_swapper_weight": 0.5}) is None
    assert audio_encode_args(audio_settings({"output_audio_volume": 0}) or pytest.fail()) == [
        "-c:a", "aac", "-q:a", "1.6", "-filter:a", "volume=0.0",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("encoder", "quality", "args"),
    [
        # FaceFusion 3.8.1's ffmpeg_builder.set_audio_quality scales, at its default quality of 80 and the ends.
        ("aac", 80, ["-q:a", "1.6"]),
        ("aac", 0, ["-q:a", "0.1"]),
        ("libmp3lame", 80, ["-q:a", "2"]),
        ("libmp3lame", 100, ["-q:a", "0"]),
        ("libopus", 80, ["-b:a", "218k"]),
        ("flac", 80, []),
    ],
)
def test_audio_quality_follows_facefusions_scales(encoder: str, quality: int, args: list[str]) -> None:
    settings = audio_settings({"output_audio_encoder": encoder, "output_audio_quality": quality})
    assert settings is not None
    assert audio_encode_args(settings) == ["-c:a", encoder, *args]


@pytest.mark.parametrize("encoder", ["libvorbis", "pcm_s16le"])
def test_audio_encoders_an_mp4_player_would_not_play_are_refused(encoder: str) -> None:
    raw = json.dumps({"source": "f.png", "target": "c.mp4", "options": {"output_audio_encoder": encoder}}).encode()
    with pytest.raises(JobRejected, match=f"output_audio_encoder: '{encoder}' does not belong in a .mp4 output"):
        parse_manifest(raw, "jobs/a.json")
