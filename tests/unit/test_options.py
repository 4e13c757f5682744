"""The FaceFusion option catalogue: normalisation, problem reporting, argv building and CLI parsing."""

from __future__ import annotations

from collections import Counter

import pytest

from fusionfleet.facefusion.options import (
    CATALOGUE,
    DEPENDENT_CHOICES,
    SYSTEM_OPTIONS,
    OptionsError,
    OptionSpec,
    parse_cli_value,
    to_cli_args,
    validate_options,
)

AGE_PAIR = ("face_selector_age_start", "face_selector_age_end")


def _problems(raw: dict[str, object]) -> tuple[str, ...]:
    with pytest.raises(OptionsError) as caught:
        validate_options(raw)
    return caught.value.problems


def _valid_value(spec: OptionSpec) -> object:
    """A value the spec accepts, away from the defaults/edges so a wrong conversion would show."""
    value: object
    if spec.name in DEPENDENT_CHOICES:
        dependency = DEPENDENT_CHOICES[spec.name]
        value = dependency.by_model[dependency.default_model][-1]
    elif spec.choices is not None:
        value = spec.choices[-1]
    elif spec.step is not None and spec.minimum is not None and spec.maximum is not None:
        steps = round((spec.maximum - spec.minimum) / spec.step)
        point = spec.minimum + spec.step * (steps // 3)
        value = int(point) if spec.kind == "int" else round(point, 2)
    else:
        low = spec.minimum if spec.minimum is not None else 0
        value = int(low) + 3 if spec.kind == "int" else float(low) + 23.976
    if spec.multiple:
        return [value, value] if spec.choices is None else [spec.choices[0], value]
    return value


def _with_partners(name: str, value: object) -> dict[str, object]:
    """The option alone, or with the partner FaceFusion needs alongside it."""
    if name == "face_selector_age_start":
        return {name: value, "face_selector_age_end": 100}
    if name == "face_selector_age_end":
        return {"face_selector_age_start": 0, name: value}
    return {name: value}


def _split_argv(argv: list[str]) -> dict[str, list[str]]:
    """Group an argv fragment by flag; negative numbers ('-0.35') are values, not flags."""
    by_flag = {spec.flag: spec for spec in CATALOGUE.values()}
    grouped: dict[str, list[str]] = {}
    current = ""
    for token in argv:
        if token in by_flag:
            current = token
            grouped[current] = []
        else:
            grouped[current].append(token)
    return grouped


# --- normalisation --------------------------------------------------------------------------------


def test_realistic_options_normalise_as_documented() -> None:
    # GIVEN a manifest's options as JSON would deliver them, with loose but acceptable spellings
    raw: dict[str, object] = {
        "processors": "face_swapper",  # a lone scalar for a list option
        "face_swapper_model": "hyperswap_1a_256",
        "face_swapper_pixel_boost": "512x512",
        "face_swapper_weight": 1,  # an int for a float option
        "face_selector_mode": "one",
        "output_video_quality": 80.0,  # a whole float for an int option
        "face_mask_types": ["box", "occlusion"],
        "face_mask_blur": 0.1 + 0.2,  # 0.30000000000000004: float noise
        "face_detector_margin": [0, 10],
    }

    # WHEN the options are validated
    result = validate_options(raw)

    # THEN the types are FaceFusion's, lists are lists, noise is gone and keys are sorted
    assert result == {
        "face_detector_margin": [0, 10],
        "face_mask_blur": 0.3,
        "face_mask_types": ["box", "occlusion"],
        "face_selector_mode": "one",
        "face_swapper_model": "hyperswap_1a_256",
        "face_swapper_pixel_boost": "512x512",
        "face_swapper_weight": 1.0,
        "output_video_quality": 80,
        "processors": ["face_swapper"],
    }
    assert list(result) == sorted(result)
    assert type(result["output_video_quality"]) is int
    assert type(result["face_swapper_weight"]) is float
    assert repr(result["face_mask_blur"]) == "0.3"


def test_empty_options_are_valid() -> None:
    # GIVEN no options WHEN validated THEN FaceFusion's defaults apply and nothing is reported
    assert validate_options({}) == {}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (80.5, "options.output_video_quality: expected a whole number, got 80.5"),
        ("80", "options.output_video_quality: expected a whole number, got the string '80'"),
        (True, "options.output_video_quality: expected a whole number, got the boolean true"),
        (None, "options.output_video_quality: expected a whole number, got null"),
        (float("nan"), "options.output_video_quality: expected a whole number, got nan"),
    ],
)
def test_int_option_refuses_what_is_not_a_whole_number(value: object, expected: str) -> None:
    # GIVEN an int option given a fraction, text, a boolean, null or NaN
    # WHEN validated
    problems = _problems({"output_video_quality": value})
    # THEN the one problem names the option and what it got
    assert problems == (expected,)


def test_float_option_refuses_text_booleans_and_infinity() -> None:
    # GIVEN float options given text, a boolean and infinity
    problems = _problems({"face_swapper_weight": "0.5", "face_mask_blur": False, "output_video_fps": float("inf")})
    # THEN each is reported with what was wrong
    assert problems == (
        "options.face_mask_blur: expected a number, got the boolean false",
        "options.face_swapper_weight: expected a number, got the string '0.5'",
        "options.output_video_fps: expected a finite number, got inf",
    )


def test_string_option_refuses_a_number() -> None:
    problems = _problems({"face_selector_mode": 1})
    assert problems == ("options.face_selector_mode: expected a string, got the number 1",)


# --- problems, one kind at a time -------------------------------------------------------------------


def test_value_outside_choices_lists_the_choices() -> None:
    # GIVEN a face selector mode FaceFusion does not have
    problems = _problems({"face_selector_mode": "several"})
    # THEN the message names the option, the value and FaceFusion's choices
    assert problems == ("options.face_selector_mode: 'several' is not one of many, one, reference",)


def test_near_miss_choice_gets_a_suggestion() -> None:
    problems = _problems({"face_enhancer_model": "gfpgan_14"})
    assert len(problems) == 1
    assert problems[0].startswith("options.face_enhancer_model: 'gfpgan_14' is not one of codeformer, ")
    assert problems[0].endswith("; did you mean 'gfpgan_1.4'?")


def test_long_choice_list_is_summarised_with_a_suggestion() -> None:
    # GIVEN a deep swapper model without its resolution suffix (157 choices: too many to list)
    problems = _problems({"deep_swapper_model": "iperov/elon_musk"})
    # THEN the message counts the choices instead of listing them, and suggests the near one
    assert problems == (
        "options.deep_swapper_model: 'iperov/elon_musk' is not one of the 157 known choices;"
        " did you mean 'iperov/elon_musk_224'?",
    )


def test_value_outside_range() -> None:
    problems = _problems({"output_video_quality": 101, "age_modifier_direction": -101})
    assert problems == (
        "options.age_modifier_direction: -101 is outside -100..100",
        "options.output_video_quality: 101 is outside 0..100",
    )


def test_value_below_an_open_ended_minimum() -> None:
    problems = _problems({"reference_face_position": -1})
    assert problems == ("options.reference_face_position: -1 is below the minimum 0",)


def test_float_off_facefusions_grid_is_refused_with_the_nearest_points() -> None:
    # GIVEN 0.33 where FaceFusion's argparse only takes 0.0, 0.05, ..., 1.0
    problems = _problems({"face_mask_blur": 0.33})
    # THEN the message names the step and the two nearest accepted values
    assert problems == ("options.face_mask_blur: 0.33 is not a multiple of 0.05 from 0.0 (nearest: 0.3 or 0.35)",)


def test_scale_grid_starts_at_its_minimum() -> None:
    # GIVEN scales on and off the 0.25 grid that starts at 0.25
    assert validate_options({"output_video_scale": 2.75}) == {"output_video_scale": 2.75}
    problems = _problems({"output_video_scale": 1.1})
    assert problems == ("options.output_video_scale: 1.1 is not a multiple of 0.25 from 0.25 (nearest: 1.0 or 1.25)",)


def test_list_problems_name_each_bad_item() -> None:
    # GIVEN a list option with two bad items and one good
    problems = _problems({"face_mask_types": ["box", "nose", 3]})
    # THEN both bad items are reported with their index
    assert problems == (
        "options.face_mask_types[1]: 'nose' is not one of box, occlusion, area, region",
        "options.face_mask_types[2]: expected a string, got the number 3",
    )


def test_list_option_needs_at_least_one_value() -> None:
    assert _problems({"processors": []}) == ("options.processors: needs at least one value",)


def test_padding_takes_at_most_four_values() -> None:
    problems = _problems({"face_mask_padding": [1, 2, 3, 4, 5]})
    assert problems == ("options.face_mask_padding: takes at most 4 values, got 5",)


def test_single_option_refuses_a_list() -> None:
    problems = _problems({"face_swapper_model": ["hyperswap_1a_256"]})
    assert problems == ("options.face_swapper_model: expected a single value, got a list",)


def test_unknown_option_suggests_the_closest_name() -> None:
    # GIVEN a typo of face_swapper_model
    problems = _problems({"face_swaper_model": "hyperswap_1a_256"})
    # THEN it is unknown, not ignored, and the right name is suggested
    assert problems == ("options.face_swaper_model: unknown option; did you mean 'face_swapper_model'?",)


def test_unknown_option_without_a_close_name() -> None:
    assert _problems({"zzz": 1}) == ("options.zzz: unknown option",)


def test_cli_spelling_is_pointed_at_the_underscore_name() -> None:
    problems = _problems({"face-swapper-model": "hyperswap_1a_256"})
    assert problems == (
        "options.face-swapper-model: unknown option; FaceFusion names are written with underscores:"
        " 'face_swapper_model'",
    )


@pytest.mark.parametrize("name", ["execution_providers", "temp_path", "target_path", "log_level"])
def test_system_option_gets_its_own_message(name: str) -> None:
    # GIVEN a job that sets an option the worker owns
    problems = _problems({name: "x"})
    # THEN it is told who sets it, not that the name is unknown
    assert problems == (f"options.{name}: {name} is set by the worker, not by the job",)


def test_system_option_in_cli_spelling_is_still_the_workers() -> None:
    problems = _problems({"execution-providers": ["cuda"]})
    assert problems == ("options.execution-providers: execution_providers is set by the worker, not by the job",)


def test_several_problems_come_back_together_in_name_order() -> None:
    # GIVEN one options object with five different kinds of problem and one good option
    raw: dict[str, object] = {
        "output_video_quality": "80",
        "face_selector_mode": "several",
        "face_swaper_model": "x",
        "execution_providers": ["cuda"],
        "face_mask_blur": 2.0,
        "face_swapper_weight": 0.5,
    }

    # WHEN validated
    with pytest.raises(OptionsError) as caught:
        validate_options(raw)

    # THEN every problem is listed once, sorted by option name, and the message joins them all
    assert caught.value.problems == (
        "options.execution_providers: execution_providers is set by the worker, not by the job",
        "options.face_mask_blur: 2.0 is outside 0.0..1.0",
        "options.face_selector_mode: 'several' is not one of many, one, reference",
        "options.face_swaper_model: unknown option; did you mean 'face_swapper_model'?",
        "options.output_video_quality: expected a whole number, got the string '80'",
    )
    assert str(caught.value) == "; ".join(caught.value.problems)
    assert isinstance(caught.value, ValueError)


def test_non_mapping_options_are_refused() -> None:
    with pytest.raises(OptionsError) as caught:
        validate_options(["face_swapper"])  # type: ignore[arg-type]
    assert caught.value.problems == ("options: expected an object of option names to values, got a list",)


# --- rules between options -------------------------------------------------------------------------


def test_detector_size_must_suit_facefusions_default_model() -> None:
    # GIVEN a detector size only retinaface/scrfd offer, with the model left to FaceFusion's yolo_face
    problems = _problems({"face_detector_size": "320x320"})
    # THEN the size is refused, naming the model it was checked against and what that model takes
    assert problems == (
        "options.face_detector_size: '320x320' is not available with face_detector_model 'yolo_face'"
        " (FaceFusion's default), which takes 640x640",
    )


def test_detector_size_follows_the_chosen_model() -> None:
    options = {"face_detector_model": "retinaface", "face_detector_size": "320x320"}
    assert validate_options(options) == options


def test_pixel_boost_must_suit_the_chosen_swapper_model() -> None:
    problems = _problems({"face_swapper_model": "simswap_unofficial_512", "face_swapper_pixel_boost": "256x256"})
    assert problems == (
        "options.face_swapper_pixel_boost: '256x256' is not available with face_swapper_model"
        " 'simswap_unofficial_512', which takes 512x512, 768x768, 1024x1024",
    )
    assert validate_options({"face_swapper_model": "inswapper_128", "face_swapper_pixel_boost": "128x128"})


def test_bad_model_is_not_also_reported_as_a_bad_size() -> None:
    # GIVEN an unknown model and a size: only the model is wrong
    problems = _problems({"face_swapper_model": "nope", "face_swapper_pixel_boost": "128x128"})
    assert len(problems) == 1
    assert problems[0].startswith("options.face_swapper_model: 'nope' is not one of ")


def test_age_filter_needs_both_ends() -> None:
    # GIVEN only the start of the age filter (FaceFusion would call range(20, None) and crash)
    problems = _problems({"face_selector_age_start": 20})
    assert problems == (
        "options.face_selector_age_start: needs face_selector_age_end as well"
        " (FaceFusion filters on the range of both)",
    )


def test_age_filter_start_must_be_below_end() -> None:
    problems = _problems({"face_selector_age_start": 60, "face_selector_age_end": 20})
    assert problems == ("options.face_selector_age_start: 60 must be below face_selector_age_end (20)",)
    assert validate_options({"face_selector_age_start": 20, "face_selector_age_end": 60})


# --- argv ----------------------------------------------------------------------------------------


def test_to_cli_args_writes_catalogue_order_and_clean_floats() -> None:
    # GIVEN options in an order unrelated to FaceFusion's
    options: dict[str, object] = {
        "face_swapper_weight": 0.35,
        "processors": ["face_swapper", "face_enhancer"],
        "output_video_quality": 80,
        "face_mask_types": ["box", "occlusion"],
        "face_editor_head_yaw": -0.05,
        "face_swapper_model": "hyperswap_1a_256",
        "face_selector_mode": "one",
        "output_video_fps": 25,
    }

    # WHEN turned into argv
    argv = to_cli_args(options)

    # THEN flags follow FaceFusion's order, lists spread out, floats carry no noise
    assert argv == [
        "--face-selector-mode",
        "one",
        "--face-mask-types",
        "box",
        "occlusion",
        "--output-video-quality",
        "80",
        "--output-video-fps",
        "25.0",
        "--processors",
        "face_swapper",
        "face_enhancer",
        "--face-editor-head-yaw",
        "-0.05",
        "--face-swapper-model",
        "hyperswap_1a_256",
        "--face-swapper-weight",
        "0.35",
    ]


def test_to_cli_args_refuses_invalid_options() -> None:
    with pytest.raises(OptionsError):
        to_cli_args({"face_selector_mode": "several"})


def test_every_option_round_trips_through_argv_and_back() -> None:
    # GIVEN a valid value for every option in the catalogue, all at once
    options = {name: _valid_value(spec) for name, spec in CATALOGUE.items()}
    options["face_selector_age_start"], options["face_selector_age_end"] = 20, 60
    expected = validate_options(options)

    # WHEN written as argv and each flag's strings parsed back
    grouped = _split_argv(to_cli_args(options))
    parsed = {flag.removeprefix("--").replace("-", "_"): values for flag, values in grouped.items()}
    back = {name: parse_cli_value(CATALOGUE[name], values) for name, values in parsed.items()}

    # THEN every option comes back, typed exactly as validation normalised it
    assert back == expected
    assert set(back) == set(CATALOGUE)
    for name, value in back.items():
        assert type(value) is type(expected[name]), name


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_each_option_round_trips_on_its_own(name: str) -> None:
    # GIVEN one option (with the partner FaceFusion needs alongside it)
    spec = CATALOGUE[name]
    options = _with_partners(name, _valid_value(spec))

    # WHEN turned into argv and the option's own strings parsed back
    grouped = _split_argv(to_cli_args(options))

    # THEN the parsed value is the normalised one
    assert parse_cli_value(spec, grouped[spec.flag]) == validate_options(options)[name]


def test_parse_cli_value_types_and_checks_a_value() -> None:
    assert parse_cli_value(CATALOGUE["output_video_quality"], ["80"]) == 80
    assert parse_cli_value(CATALOGUE["face_swapper_weight"], ["1"]) == 1.0
    assert parse_cli_value(CATALOGUE["face_mask_types"], ["box"]) == ["box"]
    assert parse_cli_value(CATALOGUE["face_detector_angles"], ["0", "90"]) == [0, 90]


@pytest.mark.parametrize(
    ("name", "values", "expected"),
    [
        ("output_video_quality", ["eighty"], "--output-video-quality: 'eighty' is not a whole number"),
        ("output_video_quality", ["80.5"], "--output-video-quality: '80.5' is not a whole number"),
        ("face_swapper_weight", ["heavy"], "--face-swapper-weight: 'heavy' is not a number"),
        ("face_selector_mode", ["one", "many"], "--face-selector-mode: takes one value, got 2"),
        ("face_mask_types", [], "--face-mask-types: needs a value"),
        ("output_video_quality", ["101"], "--output-video-quality: 101 is outside 0..100"),
        ("face_detector_angles", ["90", "45"], "--face-detector-angles[1]: 45 is not one of 0, 90, 180, 270"),
    ],
)
def test_parse_cli_value_reports_bad_strings(name: str, values: list[str], expected: str) -> None:
    with pytest.raises(OptionsError) as caught:
        parse_cli_value(CATALOGUE[name], values)
    assert caught.value.problems == (expected,)


# --- the catalogue against FaceFusion 3.8.1 (facts read from its source) -------------------------------


def test_catalogue_size_and_groups() -> None:
    counts = Counter(spec.group for spec in CATALOGUE.values())
    assert len(CATALOGUE) == 82  # with trim_frame_start and trim_frame_end, jobs options since issue 31
    assert counts["face selector"] == 9
    assert counts["face editor"] == 15
    assert counts["output creation"] == 10


def test_face_selector_mode_choices() -> None:
    assert CATALOGUE["face_selector_mode"].choices == ("many", "one", "reference")


def test_output_video_quality_is_an_int_from_0_to_100() -> None:
    spec = CATALOGUE["output_video_quality"]
    assert (spec.kind, spec.minimum, spec.maximum, spec.step, spec.multiple) == ("int", 0, 100, 1, False)


def test_face_swapper_facts() -> None:
    assert "hyperswap_1a_256" in (CATALOGUE["face_swapper_model"].choices or ())
    assert DEPENDENT_CHOICES["face_swapper_pixel_boost"].default_model == "hyperswap_1a_256"
    assert DEPENDENT_CHOICES["face_swapper_pixel_boost"].by_model["inswapper_128"][0] == "128x128"
    weight = CATALOGUE["face_swapper_weight"]
    assert (weight.kind, weight.minimum, weight.maximum, weight.step) == ("float", 0.0, 1.0, 0.05)


def test_list_options_are_facefusions_nargs_plus_options() -> None:
    multiple = {name for name, spec in CATALOGUE.items() if spec.multiple}
    assert multiple == {
        "face_detector_margin",
        "face_detector_angles",
        "face_mask_types",
        "face_mask_areas",
        "face_mask_regions",
        "face_mask_padding",
        "processors",
        "background_remover_fill_color",
        "background_remover_despill_color",
        "expression_restorer_areas",
        "face_debugger_items",
    }


def test_processors_are_the_module_folder_names() -> None:
    assert CATALOGUE["processors"].choices == (
        "age_modifier",
        "background_remover",
        "deep_swapper",
        "expression_restorer",
        "face_debugger",
        "face_editor",
        "face_enhancer",
        "face_swapper",
        "frame_colorizer",
        "frame_enhancer",
        "lip_syncer",
    )


def test_other_spot_facts() -> None:
    assert CATALOGUE["face_detector_angles"].choices == (0, 90, 180, 270)
    assert DEPENDENT_CHOICES["face_detector_size"].by_model["yolo_face"] == ("640x640",)
    assert "h264_nvenc" in (CATALOGUE["output_video_encoder"].choices or ())
    assert len(CATALOGUE["deep_swapper_model"].choices or ()) == 157
    assert CATALOGUE["face_tracker_score"].maximum == 0.5
    assert (CATALOGUE["output_image_scale"].minimum, CATALOGUE["output_image_scale"].step) == (0.25, 0.25)
    assert CATALOGUE["background_remover_fill_color"].maximum == 255


def test_catalogue_is_well_formed_and_read_only() -> None:
    assert not set(CATALOGUE) & set(SYSTEM_OPTIONS)
    assert len(SYSTEM_OPTIONS) == len(set(SYSTEM_OPTIONS))
    for name, spec in CATALOGUE.items():
        assert spec.name == name
        assert spec.group and spec.help, name
        assert spec.choices is None or len(spec.choices) > 0, name
        if spec.minimum is not None and spec.maximum is not None:
            assert spec.minimum < spec.maximum, name
    assert CATALOGUE["face_swapper_model"].flag == "--face-swapper-model"
    with pytest.raises(TypeError):
        CATALOGUE["x"] = CATALOGUE["face_swapper_model"]  # type: ignore[index]
