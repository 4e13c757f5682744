"""The requests the template and the state machine make, held to botocore's service models.

CloudFormation passes most resource properties to one API call; Step Functions passes a Task's
parameters to one SDK call. Both are checked here against that call's input shape with botocore's
own `ParamValidator` (required members, types, unknown names, minimums), after converting:

- a template's properties: intrinsic functions resolved for given parameter values (a reference to a
  resource becomes a placeholder string), member names matched without regard to case (CloudFormation
  writes `Family`, ECS's API `family`), scalars converted to the shape's type as CloudFormation does
  (every parameter value is a string);
- a Task's parameters: names matched exactly, in PascalCase (Step Functions' rule for SDK
  integrations), a `Name.$` path or intrinsic standing for a value of the member's type.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import botocore.session
from botocore.model import ListShape, MapShape, OperationModel, Shape, StructureShape
from botocore.validate import ParamValidator

from tests.support.cfn import ASL, Conditions

_SESSION = botocore.session.get_session()
_SUB = re.compile(r"\$\{([^}!]+)\}")


def operation(service: str, name: str) -> OperationModel:
    """botocore's model of `service`'s operation `name` (PascalCase, e.g. PutObject)."""
    return _SESSION.get_service_model(service).operation_model(name)


def input_shape(model: OperationModel) -> StructureShape:
    shape = model.input_shape
    assert shape is not None, f"{model.name} takes no input"
    return shape


def validate(params: dict[str, Any], model: OperationModel) -> list[str]:
    """botocore's own verdict on a request (an empty list when it would send it)."""
    report = ParamValidator().validate(params, input_shape(model))
    return report.generate_report().splitlines() if report.has_errors() else []


# ---------------------------------------------------------------- CloudFormation values


class _NoValue:
    """AWS::NoValue: the property is left out."""


NO_VALUE = _NoValue()


def resolve(node: Any, parameters: dict[str, Any], conditions: Conditions, mappings: dict[str, Any]) -> Any:
    """A property's value as CloudFormation would pass it, for given parameter values.

    Parameters resolve to their (string) values; a resource's Ref or attribute to `<Name>` or
    `<Name.Attribute>`, which stands for any string."""

    def walk(value: Any) -> Any:
        if isinstance(value, list):
            items = [walk(item) for item in value]
            return [item for item in items if item is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((function, argument),) = value.items()
            handler = _FUNCTIONS.get(function)
            if handler is not None:
                return handler(argument, walk, parameters, conditions, mappings)
        resolved = {key: walk(item) for key, item in value.items()}
        return {key: item for key, item in resolved.items() if item is not NO_VALUE}

    return walk(node)


def _ref(name: str, parameters: dict[str, Any]) -> Any:
    if name == "AWS::NoValue":
        return NO_VALUE
    return parameters.get(name, f"<{name}>")


def _sub(argument: Any, walk: Callable[[Any], Any], parameters: dict[str, Any]) -> str:
    text, variables = (argument, {}) if isinstance(argument, str) else (argument[0], walk(argument[1]))

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in variables:
            return str(variables[name])
        found = _ref(name, parameters) if "." not in name else f"<{name}>"
        return ",".join(found) if isinstance(found, list) else str(found)

    return _SUB.sub(value, text)


def _if(argument: Any, walk: Callable[[Any], Any], conditions: Conditions) -> Any:
    name, when_true, when_false = argument
    return walk(when_true if conditions[name] else when_false)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "Ref": lambda a, w, p, c, m: _ref(a, p),
    "Fn::GetAtt": lambda a, w, p, c, m: f"<{'.'.join(a) if isinstance(a, list) else a}>",
    "Fn::Sub": lambda a, w, p, c, m: _sub(a, w, p),
    "Fn::If": lambda a, w, p, c, m: _if(a, w, c),
    "Fn::Join": lambda a, w, p, c, m: a[0].join(str(x) for x in w(a[1])),
    "Fn::Select": lambda a, w, p, c, m: w(a[1])[int(w(a[0]))],
    "Fn::Split": lambda a, w, p, c, m: str(w(a[1])).split(a[0]),
    "Fn::FindInMap": lambda a, w, p, c, m: m[w(a[0])][w(a[1])][w(a[2])],
    "Fn::Base64": lambda a, w, p, c, m: str(w(a)),
    "Fn::GetAZs": lambda a, w, p, c, m: ["<az-1>", "<az-2>"],
    "Fn::ImportValue": lambda a, w, p, c, m: "<import>",
}


def to_request(value: Any, shape: Shape, path: str, problems: list[str]) -> Any:
    """A resolved CloudFormation value in the API's terms: member names as the model spells them
    (matched without regard to case), scalars converted as CloudFormation converts them. A name the
    model does not know is a problem (CloudFormation would have to map it to another call)."""
    if isinstance(shape, StructureShape):
        if not isinstance(value, dict):
            problems.append(f"{path}: {value!r} where the API takes a structure")
            return value
        members = {name.lower(): name for name in shape.members}
        request: dict[str, Any] = {}
        for key, item in value.items():
            member = members.get(key.lower())
            if member is None:
                problems.append(f"{path}.{key}: not a member of {shape.name}")
                continue
            request[member] = to_request(item, shape.members[member], f"{path}.{key}", problems)
        return request
    if isinstance(shape, ListShape):
        if not isinstance(value, list):
            problems.append(f"{path}: {value!r} where the API takes a list")
            return value
        return [to_request(item, shape.member, f"{path}[{i}]", problems) for i, item in enumerate(value)]
    if isinstance(shape, MapShape):
        if not isinstance(value, dict):
            problems.append(f"{path}: {value!r} where the API takes a map")
            return value
        return {key: to_request(item, shape.value, f"{path}.{key}", problems) for key, item in value.items()}
    return _scalar(value, shape.type_name, path, problems)


def _scalar(value: Any, type_name: str, path: str, problems: list[str]) -> Any:
    if isinstance(value, (dict, list)):
        problems.append(f"{path}: {value!r} where the API takes a {type_name}")
        return value
    try:
        if type_name in ("string", "blob", "timestamp"):
            return str(value).lower() if isinstance(value, bool) else str(value)
        if type_name in ("integer", "long"):
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            return int(value)
        if type_name in ("double", "float"):
            return float(value)
        if type_name == "boolean":
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("true", "false"):
                return str(value).lower() == "true"
            raise ValueError(value)
    except (TypeError, ValueError):
        problems.append(f"{path}: {value!r} is not a {type_name}")
        return value
    return value


# ---------------------------------------------------------------- Step Functions parameters

# What CloudFormation substitutes into the definition on an AWS stage (DefinitionSubstitutions), as
# values of the kind each one is: a partition, a bucket's name, a topic's ARN, queue URLs.
SUBSTITUTED = {
    "${Partition}": "aws", "${WorkBucket}": "fleet-work",
    "${NotificationTopicArn}": "arn:aws:sns:us-east-1:123456789012:fleet-notifications",
    "${MergeCluster}": "fleet-cluster", "${MergeService}": "fleet-merge",
}  # fmt: skip
_QUEUE_URL = re.compile(r"\$\{(\w*Queue\w*)Url\}")


def substituted_definition() -> dict[str, Any]:
    """render.asl.json as Step Functions receives it on an AWS stage."""
    text = ASL.read_text()
    for placeholder, value in SUBSTITUTED.items():
        text = text.replace(placeholder, value)
    text = _QUEUE_URL.sub(lambda m: f"https://sqs.us-east-1.amazonaws.com/123456789012/fleet-{m.group(1)}", text)
    assert "${" not in text, "a substitution the checks do not know: add it to SUBSTITUTED"
    return dict(json.loads(text))


def _pascal(name: str) -> str:
    return name[0].upper() + name[1:]


def placeholder(shape: Shape) -> Any:
    """A value of the shape's type, for a parameter a path fills in at run time."""
    if isinstance(shape, StructureShape):
        return {name: placeholder(shape.members[name]) for name in shape.required_members}
    if isinstance(shape, ListShape):
        return [placeholder(shape.member)]
    if isinstance(shape, MapShape):
        return {}
    return {
        "integer": 1, "long": 1, "double": 1.0, "float": 1.0, "boolean": True, "blob": b"x",
    }.get(shape.type_name, "x")  # fmt: skip


def task_request(
    parameters: dict[str, Any], shape: Shape, path: str, problems: list[str], json_strings: frozenset[str] = frozenset()
) -> Any:
    """A Task's parameters as the SDK call Step Functions makes: exact PascalCase names, each `Name.$`
    a value of the member's type. Members in `json_strings` may be JSON objects (the optimized SQS and
    SNS integrations serialise a MessageBody or Message object to a string)."""
    if not isinstance(shape, StructureShape):
        return parameters
    members = {_pascal(name): name for name in shape.members}
    request: dict[str, Any] = {}
    for key, value in parameters.items():
        dynamic = key.endswith(".$")
        name = key.removesuffix(".$")
        member = members.get(name)
        if member is None:
            close = [m for m in members if m.lower() == name.lower()]
            hint = f" (the SDK's name is {close[0]})" if close else ""
            problems.append(f"{path}.{name}: not a parameter of {shape.name}{hint}")
            continue
        member_shape = shape.members[member]
        if dynamic:
            request[member] = placeholder(member_shape)
        elif name in json_strings and isinstance(value, (dict, list)):
            request[member] = "{}"
        elif isinstance(member_shape, StructureShape) and isinstance(value, dict):
            request[member] = task_request(value, member_shape, f"{path}.{name}", problems)
        elif isinstance(member_shape, MapShape) and isinstance(value, dict):
            request[member] = {
                k: task_request(v, member_shape.value, f"{path}.{name}.{k}", problems) if isinstance(v, dict) else v
                for k, v in value.items()
            }
        else:
            request[member] = value
    return request
