"""The quality preset table."""

from __future__ import annotations

import dataclasses

import pytest

from gpu_worker.engines.base import QUALITY_PRESETS, EngineError
from gpu_worker.engines.classic.presets import PRESETS, Blend, ColourMatch, Smoothing, preset_for


def test_there_is_one_preset_per_quality_name() -> None:
    # GIVEN the interface's quality names
    # WHEN the preset table is read
    # THEN it has exactly those presets, each named after its key
    assert tuple(PRESETS) == QUALITY_PRESETS
    assert all(preset.name == name for name, preset in PRESETS.items())


def test_presets_are_frozen() -> None:
    # GIVEN a preset
    preset = preset_for("balanced")

    # WHEN someone tries to change it
    # THEN it refuses (presets are shared by every job)
    with pytest.raises(dataclasses.FrozenInstanceError):
        preset.detect_interval = 1  # type: ignore[misc]


def test_presets_trade_speed_for_quality() -> None:
    # GIVEN the three presets
    realtime, balanced, cinema = (preset_for(name) for name in QUALITY_PRESETS)

    # WHEN their switches are compared
    # THEN realtime skips Poisson blending, full colour matching and optical flow, and detects least
    # often; balanced and cinema follow faces with flow, blend with Poisson and match regional
    # colour; cinema detects most often; every preset smooths landmarks
    assert realtime.blend is Blend.FEATHER and realtime.colour is ColourMatch.MEAN and not realtime.optical_flow
    assert balanced.blend is cinema.blend is Blend.POISSON
    assert balanced.colour is cinema.colour is ColourMatch.REGIONAL
    assert balanced.optical_flow and cinema.optical_flow
    assert realtime.detect_interval > balanced.detect_interval > cinema.detect_interval
    assert all(p.smoothing is not Smoothing.NONE for p in (realtime, balanced, cinema))


def test_unknown_quality_is_an_engine_error() -> None:
    # GIVEN a quality name that does not exist
    # WHEN its preset is asked for
    # THEN the error lists the valid names
    with pytest.raises(EngineError, match="realtime, balanced, cinema"):
        preset_for("ultra")
