"""template.yaml as CloudFormation resolves it, for the static checks: the source, the SAM-transformed
template per stage, a small evaluator of conditions, references, and the IAM statements of a role.

CloudFormation, not SAM, resolves conditions, so the transform leaves them for this evaluator.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import boto3
from cfnlint.decode import cfn_yaml
from samtranslator.parser.parser import Parser
from samtranslator.translator.translator import Translator

from fleetctl.local.deploy import local_artifacts, rewrite_artifacts

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
ASL = ROOT / "infra" / "statemachine" / "render.asl.json"

Template = dict[str, Any]

STAGES = ("local", "prod")
PSEUDO_PARAMETERS = {
    "AWS::Region": "us-east-1", "AWS::Partition": "aws", "AWS::AccountId": "123456789012",
    "AWS::StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/fleet/00000000-0000-0000-0000-000000000000",
}  # fmt: skip


# ---------------------------------------------------------------- loading and transforming


def _plain(value: Any) -> Any:
    """cfn-lint's YAML nodes as plain dicts, lists and strings."""
    return json.loads(json.dumps(value))


@cache
def source() -> Template:
    """template.yaml as written (short tags such as !Ref become their Fn:: form)."""
    return dict(_plain(cfn_yaml.load(str(TEMPLATE))))


def _managed_policy_map() -> dict[str, str]:
    """AWS managed policies by name, offline: SAM's bundled copy (never iam:ListPolicies)."""
    try:
        from samtranslator.internal.managed_policies import get_bundled_managed_policy_map
    except ImportError:  # an aws-sam-translator without the bundled map
        return {}
    return dict(get_bundled_managed_policy_map("aws") or {})


@cache
def _packaged_text() -> str:
    """The template as `sam package` (and the local deploy) hands it over: local paths as S3 URIs."""
    text = TEMPLATE.read_text()
    uploaded = {
        path: f"artifacts/{index}/{Path(path).name or 'code'}" for index, (_, path) in enumerate(local_artifacts(text))
    }
    return rewrite_artifacts(text, uploaded, "deployment-bucket")


def transform(stage: str) -> Template:
    return copy.deepcopy(_transform(stage))


@cache
def _transform(stage: str) -> Template:
    sam_template = _plain(cfn_yaml.loads(_packaged_text()))
    translator = Translator(None, Parser(), boto_session=boto3.session.Session(region_name="us-east-1"))
    result = translator.translate(
        sam_template,
        parameter_values={"Stage": stage},
        get_managed_policy_map=_managed_policy_map,
    )
    return dict(_plain(result))


# ---------------------------------------------------------------- conditions and references


def parameter_values(template: Template, stage: str) -> dict[str, Any]:
    values: dict[str, Any] = {name: spec.get("Default") for name, spec in template.get("Parameters", {}).items()}
    values.update(PSEUDO_PARAMETERS)
    values["Stage"] = stage
    return values


class Conditions:
    """Evaluates a template's Conditions for given parameter values (Fn::Equals/Not/And/Or, Condition)."""

    def __init__(self, template: Template, parameters: dict[str, Any]) -> None:
        self._definitions: dict[str, Any] = template.get("Conditions", {})
        self._parameters = parameters
        self._values: dict[str, bool] = {}

    def __getitem__(self, name: str) -> bool:
        if name not in self._values:
            self._values[name] = self._boolean(self._definitions[name])
        return self._values[name]

    def holds(self, name: str | None) -> bool:
        return True if name is None else self[name]

    def _boolean(self, expression: Any) -> bool:
        ((function, argument),) = expression.items()
        if function == "Condition":
            return self[argument]
        if function == "Fn::Not":
            return not self._boolean(argument[0])
        if function == "Fn::And":
            return all(self._boolean(item) for item in argument)
        if function == "Fn::Or":
            return any(self._boolean(item) for item in argument)
        if function == "Fn::Equals":
            left, right = (self._value(item) for item in argument)
            return bool(str(left) == str(right))
        raise ValueError(f"unsupported condition function {function}")

    def _value(self, expression: Any) -> Any:
        if isinstance(expression, dict):
            if set(expression) == {"Ref"}:
                return self._parameters[expression["Ref"]]
            return self._boolean(expression)
        return expression


_SUB_NAME = re.compile(r"\$\{(?!!)([^}]+)\}")


def references(node: Any, conditions: Conditions) -> Iterator[str]:
    """Logical ids (and parameters) a piece of template refers to, following only the Fn::If branch taken."""
    if isinstance(node, list):
        for item in node:
            yield from references(item, conditions)
        return
    if not isinstance(node, dict):
        return
    if set(node) == {"Ref"}:
        yield node["Ref"]
        return
    if set(node) == {"Fn::GetAtt"}:
        target = node["Fn::GetAtt"]
        yield (target[0] if isinstance(target, list) else target.split(".")[0])
        return
    if set(node) == {"Fn::If"}:
        name, when_true, when_false = node["Fn::If"]
        yield from references(when_true if conditions[name] else when_false, conditions)
        return
    if set(node) == {"Fn::Sub"}:
        value = node["Fn::Sub"]
        text, variables = (value, {}) if isinstance(value, str) else (value[0], value[1])
        for name in _SUB_NAME.findall(text):
            base = name.split(".")[0]
            if base not in variables:
                yield base
        yield from references(list(variables.values()), conditions)
        return
    for value in node.values():
        yield from references(value, conditions)


def existing(template: Template, conditions: Conditions) -> dict[str, Any]:
    return {
        name: resource
        for name, resource in template["Resources"].items()
        if conditions.holds(resource.get("Condition"))
    }


def find_in_map(template: Template, node: Any) -> Any:
    if isinstance(node, dict) and set(node) == {"Fn::FindInMap"}:
        mapping, top, second = node["Fn::FindInMap"]
        return template["Mappings"][mapping][top][second]
    return node


def properties(template: Template, name: str) -> dict[str, Any]:
    return dict(template["Resources"][name]["Properties"])


def statements(role: dict[str, Any], conditions: Conditions | None = None) -> Iterator[dict[str, Any]]:
    """A role's inline statements; a policy under Fn::If counts when its condition holds (always without conditions)."""
    for entry in role["Properties"].get("Policies", []):
        policy = entry
        if set(entry) == {"Fn::If"}:
            name, when_true, when_false = entry["Fn::If"]
            policy = when_true if conditions is None or conditions[name] else when_false
            if policy == {"Ref": "AWS::NoValue"}:
                continue
        yield from policy["PolicyDocument"]["Statement"]


def allows(statement: dict[str, Any], action: str) -> bool:
    actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
    return statement["Effect"] == "Allow" and any(fnmatch.fnmatch(action.lower(), a.lower()) for a in actions)


# ---------------------------------------------------------------- (a) lint
