"""FaceFusion's options as command-line flags, shared by `fusionfleet submit` and the worker's `swap`."""

from __future__ import annotations

import argparse

import pytest

from fusionfleet.facefusion.flags import add_facefusion_options, collect_facefusion_options
from fusionfleet.facefusion.options import CATALOGUE, OptionsError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="test")
    add_facefusion_options(parser)
    return parser


def test_every_option_in_the_catalogue_is_a_flag() -> None:
    # GIVEN a parser with the FaceFusion options WHEN its flags are listed THEN each option has its own
    flags = {flag for action in _parser()._actions for flag in action.option_strings}
    assert {spec.flag for spec in CATALOGUE.values()} <= flags


def test_flags_become_validated_manifest_options() -> None:
    # GIVEN FaceFusion flags as a user types them
    args = _parser().parse_args(
        ["--face-selector-mode", "many", "--face-mask-types", "box", "occlusion", "--output-video-quality", "90"]
    )
    # WHEN they are collected THEN they are the manifest's options, typed, with underscores
    assert collect_facefusion_options(args) == {
        "face_mask_types": ["box", "occlusion"],
        "face_selector_mode": "many",
        "output_video_quality": 90,
    }
    # AND no flag given means no options
    assert collect_facefusion_options(_parser().parse_args([])) == {}


def test_every_bad_flag_is_reported_at_once() -> None:
    # GIVEN two bad values WHEN they are collected THEN both problems are reported together
    args = _parser().parse_args(["--face-selector-mode", "several", "--output-video-quality", "high"])
    with pytest.raises(OptionsError) as caught:
        collect_facefusion_options(args)
    assert len(caught.value.problems) == 2
    assert any("--output-video-quality" in problem for problem in caught.value.problems)
