from __future__ import annotations

from fleetctl.local.deploy import local_artifacts, rewrite_artifacts

TEMPLATE = """Resources:
  Machine:
    Type: AWS::Serverless::StateMachine
    Properties:
      DefinitionUri: infra/statemachine/render.asl.json
  Function:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/slicer/
      Handler: app.handler
"""


def test_local_paths_are_found() -> None:
    assert local_artifacts(TEMPLATE) == [
        ("DefinitionUri", "infra/statemachine/render.asl.json"),
        ("CodeUri", "functions/slicer/"),
    ]


def test_paths_are_replaced_by_s3_locations_and_nothing_else_changes() -> None:
    out = rewrite_artifacts(
        TEMPLATE,
        {"infra/statemachine/render.asl.json": "a/1/render.asl.json", "functions/slicer/": "a/2/s.zip"},
        "deploy",
    )
    assert "      DefinitionUri:\n        Bucket: deploy\n        Key: a/1/render.asl.json\n" in out
    assert "      CodeUri: s3://deploy/a/2/s.zip\n" in out
    assert out.count("\n") == TEMPLATE.count("\n") + 2
    assert "Handler: app.handler" in out
