"""The stack's Lambda functions as the template declares them, for the package checks."""

from __future__ import annotations

from tests.support.cfn import source

MEDIA_MODULES = ("av", "numpy", "imageio_ffmpeg", "cv2")
# The one function that probes media.
MEDIA_FUNCTIONS = {"SlicerFunction"}


def functions() -> dict[str, dict[str, object]]:
    return {
        name: resource
        for name, resource in source()["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
    }


def control_functions() -> list[str]:
    return sorted(set(functions()) - MEDIA_FUNCTIONS)


def handler_module(function: str) -> str:
    properties = functions()[function]["Properties"]
    assert isinstance(properties, dict)
    return str(properties["Handler"]).rsplit(".", 1)[0]
