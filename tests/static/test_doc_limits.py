"""The size caps the docs state are the code's: the slicer's media limit (fusionfleet/media/limits.py) and
the tenant API's upload cap (ApiEnvironment, the template's MaxUploadMiB), told apart where they differ."""

from __future__ import annotations

import re
from pathlib import Path

from fusionfleet.environment.api import ApiEnvironment
from fusionfleet.media.limits import MediaLimits

ROOT = Path(__file__).resolve().parents[2]
GIB = 1024**3


def _flat(name: str) -> str:
    return re.sub(r"\s+", " ", (ROOT / name).read_text())


def test_usage_states_the_media_limit_and_the_lower_api_upload_cap() -> None:
    usage = _flat("docs/usage.md")
    media_gib = MediaLimits().max_bytes // GIB
    upload_gib = ApiEnvironment.max_upload_mib // 1024
    assert f"3 hours, {media_gib} GiB by default" in usage
    assert f"`MaxUploadMiB`, {upload_gib} GiB by default" in usage


def test_the_api_pages_state_the_upload_caps_default() -> None:
    template = (ROOT / "template.yaml").read_text()
    default = re.search(r"MaxUploadMiB:\n\s+Type: Number\n\s+Default: (\d+)", template)
    assert default is not None and int(default.group(1)) == ApiEnvironment.max_upload_mib
    assert f"default {ApiEnvironment.max_upload_mib // 1024} GiB" in _flat("docs/tenants.md")
    assert f"| `MAX_UPLOAD_MIB` | {ApiEnvironment.max_upload_mib} |" in _flat("docs/configuration.md")
