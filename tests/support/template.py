"""Build moto resources from template.yaml's own properties, so unit tests cannot drift from the infrastructure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cfnlint.decode import cfn_yaml

ROOT = Path(__file__).resolve().parents[2]


def load_template() -> dict[str, Any]:
    return dict(cfn_yaml.load(str(ROOT / "template.yaml")))


def _parameter_defaults(template: dict[str, Any]) -> dict[str, Any]:
    return {name: spec.get("Default") for name, spec in template.get("Parameters", {}).items()}


def _resolve(value: Any, parameters: dict[str, Any], arns: dict[str, str]) -> Any:
    if isinstance(value, dict) and len(value) == 1:
        ((function, argument),) = value.items()
        if function == "Ref":
            return parameters.get(argument, argument)
        if function == "Fn::GetAtt":
            name = argument[0] if isinstance(argument, list) else str(argument).split(".")[0]
            return arns[name]
    if isinstance(value, dict):
        return {key: _resolve(item, parameters, arns) for key, item in value.items()}
    if isinstance(value, list):
        return [_resolve(item, parameters, arns) for item in value]
    return value


def create_queues(sqs: Any) -> dict[str, str]:
    """Every AWS::SQS::Queue of the template (DLQs first), with its visibility and redrive policy."""
    template = load_template()
    parameters = _parameter_defaults(template)
    queues = {name: r for name, r in template["Resources"].items() if r["Type"] == "AWS::SQS::Queue"}
    ordered = sorted(queues, key=lambda name: "RedrivePolicy" in queues[name].get("Properties", {}))
    urls: dict[str, str] = {}
    arns: dict[str, str] = {}
    for name in ordered:
        properties = _resolve(dict(queues[name].get("Properties", {})), parameters, arns)
        attributes = {key: str(value) for key, value in properties.items() if key != "RedrivePolicy"}
        if "RedrivePolicy" in properties:
            attributes["RedrivePolicy"] = json.dumps(properties["RedrivePolicy"])
        # A FIFO queue's name must end in .fifo (CloudFormation adds it to the names it makes).
        fifo = str(properties.get("FifoQueue", "")).lower() == "true"
        url = sqs.create_queue(QueueName=f"{name}.fifo" if fifo else name, Attributes=attributes)["QueueUrl"]
        urls[name] = url
        arns[name] = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return urls
