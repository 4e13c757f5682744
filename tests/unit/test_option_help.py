"""FaceFusion's options in the CLI's help as FaceFusion's own help shows them: choices or range in the
placeholder, FaceFusion's default, in FaceFusion's groups and order."""

from __future__ import annotations

import re

import pytest

from fleetctl.cli import build_parser
from fusionfleet.facefusion.catalogue import DEFAULTS
from fusionfleet.facefusion.flags import group_of, help_of, placeholder
from fusionfleet.facefusion.options import CATALOGUE, validate_options

# FaceFusion 3.8.1's help groups of the step options, in its order (program.py collect_step_program).
FACEFUSION_GROUPS = [
    "face detector", "face landmarker", "face selector", "face tracker", "face masker", "voice extractor",
    "frame extraction", "frame distribution", "output creation", "workflow", "processors",
]  # fmt: skip


def _help(capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["submit", "--help"])
    return capsys.readouterr().out


def test_every_option_has_facefusions_default_and_each_default_is_a_value_it_takes() -> None:
    assert set(DEFAULTS) == set(CATALOGUE)
    for name, default in DEFAULTS.items():
        if default is not None:
            value = list(default) if isinstance(default, tuple) else default
            assert validate_options({name: value}), name


def test_the_placeholder_says_what_the_flag_takes() -> None:
    assert placeholder(CATALOGUE["face_selector_mode"]) == "{many,one,reference}"
    assert placeholder(CATALOGUE["face_detector_angles"]) == "{0,90,180,270}"
    assert placeholder(CATALOGUE["face_detector_score"]) == "[0.0..1.0:0.05]"  # FaceFusion's own spelling
    assert placeholder(CATALOGUE["output_video_quality"]) == "[0..100]"
    assert placeholder(CATALOGUE["output_video_fps"]) == "[1.0..60.0]"
    assert placeholder(CATALOGUE["trim_frame_start"]) == "N"
    assert placeholder(CATALOGUE["face_swapper_model"]) == "MODEL"  # too many to read inline: in the help


def test_the_help_names_long_choice_lists_and_facefusions_default() -> None:
    assert help_of(CATALOGUE["face_selector_mode"]).endswith("(default: reference)")
    assert help_of(CATALOGUE["face_mask_types"]).endswith("(default: box)")
    assert help_of(CATALOGUE["face_detector_margin"]).endswith("(default: 0 0 0 0)")
    swapper = help_of(CATALOGUE["face_swapper_model"])
    assert "; one of " in swapper and "hyperswap_1a_256" in swapper and swapper.endswith("(default: hyperswap_1a_256)")
    assert "(157 in all)" in help_of(CATALOGUE["deep_swapper_model"])
    assert "default" not in help_of(CATALOGUE["face_selector_gender"])  # FaceFusion has none: every gender


def test_submit_help_shows_choices_ranges_and_defaults_not_placeholders(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys)
    assert re.search(r"--face-selector-mode \{many,one,reference\}\s+process every face", text)
    assert re.search(
        r"--face-detector-score \[0\.0\.\.1\.0:0\.05\]\s+minimum detection confidence \(default: 0\.5\)", text
    )
    for spec in CATALOGUE.values():
        if spec.name != "processors":  # `--processors PROCESSORS`, as FaceFusion's help writes it; listed below
            assert f"{spec.flag} {spec.name.upper()}" not in text, spec.flag


def test_the_options_sit_in_facefusions_groups_in_its_order(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys)
    headings = re.findall(r"^FaceFusion's (.+) options:$", text, flags=re.MULTILINE)
    assert headings == FACEFUSION_GROUPS
    assert {group_of(spec) for spec in CATALOGUE.values()} == set(FACEFUSION_GROUPS)
    processors = text.split("FaceFusion's processors options:")[1]
    assert "--face-swapper-model" in processors and "--lip-syncer-weight" in processors
