from __future__ import annotations

import json

import pytest

from fusionfleet.errors import JobRejected
from fusionfleet.jobs.manifest import parse_manifest

KEY = "jobs/summer/alice.json"


def manifest(**fields: object) -> bytes:
    base: dict[str, object] = {"version": 1, "source": ["inputs/alice.jpg"], "target": "inputs/clip.mp4"}
    base.update(fields)
    return json.dumps(base).encode()


def problems(raw: bytes) -> tuple[str, ...]:
    with pytest.raises(JobRejected) as caught:
        parse_manifest(raw, KEY)
    return caught.value.problems


def test_valid_manifest_gets_defaults_and_normalised_options() -> None:
    parsed = parse_manifest(manifest(options={"output_video_quality": 90.0, "face_selector_mode": "many"}), KEY)
    assert parsed.output is None  # the slicer's default: `.mp4` for a video, the image's own extension for an image
    assert parsed.priority == "normal" and parsed.quality == "balanced" and parsed.engine is None
    assert parsed.options == {"face_selector_mode": "many", "output_video_quality": 90}
    assert isinstance(parsed.options["output_video_quality"], int)


def test_a_single_source_string_means_a_list_of_one() -> None:
    assert parse_manifest(manifest(source="inputs/a.jpg"), KEY).source == ("inputs/a.jpg",)


def test_not_json_names_the_position() -> None:
    assert problems(b'{"version": 1,') == (
        "the manifest is not valid JSON: Expecting property name enclosed in double quotes at line 1 column 15",
    )


def test_every_problem_is_reported_at_once() -> None:
    found = problems(
        manifest(
            priority="urgent",
            engine="magic",
            colour="red",
            options={"face_swaper_model": "x", "output_video_quality": 500},
        )
    )
    text = " | ".join(found)
    assert "priority: 'urgent' is not one of 'high', 'normal' or 'low'" in text
    assert "engine: 'magic' is not one of classic, copy, facefusion" in text
    assert "colour: unknown field" in text
    assert "face_swaper_model" in text and "face_swapper_model" in text  # the suggestion
    assert "output_video_quality" in text
    assert len(found) == 5


def test_missing_fields_are_named() -> None:
    found = problems(json.dumps({"version": 1}).encode())
    assert any(p.startswith("source: is required") for p in found)
    assert any(p.startswith("target: is required") for p in found)


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("target", "../secrets/clip.mp4", "'..'"),
        ("target", "/etc/passwd", "starts with '/'"),
        ("target", "jobs/other.json", "reserved prefix"),
        ("target", "work/x/plan.json", "reserved prefix"),
        ("output", "inputs/overwrite.mp4", "outside the allowed prefixes"),
        ("output", "outputs/a.gif", "must end in a video container"),
        ("target", "inputs\\clip.mp4", "backslashes"),
    ],
)
def test_keys_that_climb_out_are_refused(field: str, value: str, why: str) -> None:
    found = problems(manifest(**{field: value}))
    assert any(field in p and why in p for p in found), found


def test_keys_with_spaces_plus_percent_and_unicode_are_fine() -> None:
    parsed = parse_manifest(manifest(target="inputs/Zoë + friends 100%.mp4"), KEY)
    assert parsed.target == "inputs/Zoë + friends 100%.mp4"


def test_system_options_are_refused_as_such() -> None:
    assert any("set by the worker" in p for p in problems(manifest(options={"execution_providers": ["cuda"]})))


def test_oversized_and_non_object_manifests() -> None:
    assert "over the limit" in problems(b" " * 70_000)[0]
    assert problems(b"[1, 2]") == ("the manifest must be a JSON object, not list",)


def test_problems_across_fields_keys_options_and_encoder_rules_come_in_one_error() -> None:
    # GIVEN a manifest wrong in its fields, a key, FaceFusion's options and the fleet's encoder rules
    raw = manifest(
        priority="urgent",
        output="outputs/a.mov",
        options={
            "face_swapper_weight": "heavy",
            "output_video_encoder": "h264_nvenc",
            "output_video_preset": "medium",
        },
    )
    # WHEN it is parsed
    found = problems(raw)
    # THEN every problem is in the one rejection, each named once
    text = " | ".join(found)
    assert "priority: 'urgent' is not one of" in text
    assert "options.face_swapper_weight" in text
    assert "options.output_video_encoder: 'h264_nvenc' needs NVIDIA's NVENC on every render worker" in text
    assert len(found) == 3, found


def test_a_value_facefusion_refuses_is_not_reported_again_by_the_encoder_rules() -> None:
    found = problems(manifest(options={"output_video_encoder": "mpeg2", "output_image_scale": "fast"}))
    assert len(found) == 2, found
    assert not any("not available on this fleet" in p or "not supported" in p for p in found)


def test_the_fleets_encoders_and_presets_pass() -> None:
    options = {"output_video_encoder": "libx265", "output_video_preset": "slow"}
    assert parse_manifest(manifest(options=options), KEY).options == options


def test_a_tenants_manifest_may_name_only_its_own_tenants_keys() -> None:
    raw = json.dumps({"source": "tenants/bob/inputs/face.png", "target": "tenants/acme/inputs/clip.mp4"}).encode()
    with pytest.raises(JobRejected) as refused:
        parse_manifest(raw, "tenants/acme/jobs/a.json")
    assert refused.value.problems == (
        "source[0]: key 'tenants/bob/inputs/face.png' is outside the allowed prefixes (tenants/acme/)",
    )


def test_a_tenants_output_goes_only_under_its_own_outputs() -> None:
    base = {"source": "tenants/acme/inputs/face.png", "target": "tenants/acme/inputs/clip.mp4"}
    manifest = parse_manifest(
        json.dumps({**base, "output": "tenants/acme/outputs/a.mp4"}).encode(), "tenants/acme/jobs/a.json"
    )
    assert manifest.output == "tenants/acme/outputs/a.mp4"
    for output in ("outputs/a.mp4", "tenants/bob/outputs/a.mp4", "tenants/acme/inputs/a.mp4"):
        with pytest.raises(JobRejected, match="output: key"):
            parse_manifest(json.dumps({**base, "output": output}).encode(), "tenants/acme/jobs/a.json")
    with pytest.raises(JobRejected, match="tenants/acme/jobs/"):
        parse_manifest(json.dumps({**base, "target": "tenants/acme/jobs/b.json"}).encode(), "tenants/acme/jobs/a.json")


def test_a_single_tenant_manifest_may_not_reach_into_tenants() -> None:
    raw = json.dumps({"source": "face.png", "target": "tenants/acme/inputs/clip.mp4"}).encode()
    with pytest.raises(JobRejected, match="reserved prefix"):
        parse_manifest(raw, "jobs/a.json")
