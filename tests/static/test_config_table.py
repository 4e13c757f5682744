"""Each setting is declared once, in the table (fusionfleet/environment/settings.py), and everything else
follows from it: docs/configuration.md's tables are its generated text, each component's environment
class reads exactly the table's variables for that component with the table's types and defaults,
template.yaml sets only variables the table gives the part it configures, every flag it names exists
(and each `local up` flag reaches its variable in that component's process), and no variable's name is
written as a string anywhere else in the product code (the source is scanned by glob, wherever a file
moves; tests may spell a name, as an independent check).
"""

from __future__ import annotations

import argparse
import ast
import re
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetctl.cli import build_parser, up_options
from fleetctl.local.processes import process_environments
from fleetctl.stack import StackResources
from fusionfleet.environment import docs, settings
from fusionfleet.environment.api import ApiEnvironment
from fusionfleet.environment.contract import _base, names
from fusionfleet.environment.dead_letters import DeadLetterEnvironment
from fusionfleet.environment.facefusion import READ_AS_IS, FaceFusionEnvironment
from fusionfleet.environment.job_events import JobEventsEnvironment
from fusionfleet.environment.recording import IamRecordingEnvironment
from fusionfleet.environment.slicer import SlicerEnvironment
from fusionfleet.environment.watchdog import WatchdogEnvironment
from fusionfleet.environment.worker import WorkerEnvironment
from gpu_worker import config as worker_config
from tests.support.template import load_template

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("fusionfleet", "fleetctl", "gpu_worker", "functions", "infra", "benchmarks", "scripts")
TABLE_FILE = ROOT / "fusionfleet" / "environment" / "settings.py"
VARIABLE = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
ENV_RECEIVERS = {"env", "environ"}
CLASSES: dict[str, type[Any]] = {
    settings.WORKER: WorkerEnvironment,
    settings.SLICER: SlicerEnvironment,
    settings.DEAD_LETTERS: DeadLetterEnvironment,
    settings.WATCHDOG: WatchdogEnvironment,
    settings.JOB_EVENTS: JobEventsEnvironment,
    settings.API: ApiEnvironment,
    settings.RECORDING: IamRecordingEnvironment,
    settings.FACEFUSION: FaceFusionEnvironment,
}
HANDLERS = {
    "functions.slicer.app.handler": settings.SLICER,
    "functions.dlq.app.handler": settings.DEAD_LETTERS,
    "functions.watchdog.app.handler": settings.WATCHDOG,
    "functions.job_events.app.handler": settings.JOB_EVENTS,
    "functions.api.app.handler": settings.API,
}


def _sources() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((ROOT / package).glob("**/*.py"))


def _string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _is_environment(node: ast.AST) -> bool:
    """`os.environ`, `environ` or a mapping called `env` (how entry points pass the environment on)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ"
    return isinstance(node, ast.Name) and node.id in ENV_RECEIVERS


def _read_by_literal(node: ast.AST) -> str | None:
    """The variable a node reads by a literal name, if any."""
    # os.environ["NAME"], env["NAME"] (read, not written)
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environment(node.value):
        return _string(node.slice)
    # os.environ.get("NAME"), env.get("NAME"), os.getenv("NAME")
    if isinstance(node, ast.Call) and node.args and isinstance(node.func, ast.Attribute):
        function = node.func
        if (function.attr == "get" and _is_environment(function.value)) or function.attr == "getenv":
            return _string(node.args[0])
    return None


def literal_reads(tree: ast.AST) -> set[str]:
    """Variables read by a name written as a string where they are read."""
    return {name for node in ast.walk(tree) if (name := _read_by_literal(node)) and VARIABLE.fullmatch(name)}


def named(tree: ast.AST, table: set[str]) -> set[str]:
    """The table's variables whose names are written as a string."""
    return {text for node in ast.walk(tree) if (text := _string(node)) in table}


def test_the_scan_sees_each_kind_of_read_and_each_name_written() -> None:
    # GIVEN each way code names a variable
    source = """
import os
a = os.environ["AWS_REGION_X"]
b = os.environ.get("AWS_ENDPOINT_X")
c = env.get("AWS_DEFAULT_X")
d = os.getenv("LOG_LEVEL_X")
os.environ["WRITTEN_ONLY"] = "1"
f = self._env.get("PATH")
g = {"WORK_BUCKET": "w"}
h = f"{x}"
"""
    tree = ast.parse(source)
    # THEN every read is found, writes and unrelated strings are not; a table name is found anywhere
    assert literal_reads(tree) == {"AWS_REGION_X", "AWS_ENDPOINT_X", "AWS_DEFAULT_X", "LOG_LEVEL_X"}
    assert named(tree, {"WORK_BUCKET", "MEDIA_BUCKET"}) == {"WORK_BUCKET"}


def test_no_variable_name_is_written_outside_the_table_and_none_is_read_undeclared() -> None:
    # GIVEN every source file but the table
    table = {str(setting) for setting in settings.TABLE}
    written: dict[str, list[str]] = {}
    undeclared: dict[str, list[str]] = {}
    for path in _sources():
        if path == TABLE_FILE:
            continue
        tree = ast.parse(path.read_text(), str(path))
        where = str(path.relative_to(ROOT))
        for name in named(tree, table):
            written.setdefault(name, []).append(where)
        for name in literal_reads(tree) - table:
            undeclared.setdefault(name, []).append(where)
    # THEN a variable's name is written once, in the table; code refers to the table's entry
    assert not written, f"use fusionfleet.environment.settings' entry instead of the name: {written}"
    assert not undeclared, f"declare these in fusionfleet/environment/settings.py: {undeclared}"


def test_the_table_names_each_variable_once_by_its_own_name() -> None:
    declared = [name for name, value in vars(settings).items() if isinstance(value, settings.Setting)]
    assert declared == [str(setting) for setting in settings.TABLE]  # each constant is its variable
    assert len(set(settings.TABLE)) == len(settings.TABLE) >= 99
    for component in settings.COMPONENTS:
        assert settings.read_by(component), component


def test_the_configuration_doc_is_the_tables_generated_text() -> None:
    text = docs.DOC.read_text()
    assert text == docs.rewrite(text), "run: python -m fusionfleet.environment.docs"
    markers = [match.group(1) for line in text.splitlines() if (match := docs.MARKER.match(line))]
    assert sorted(markers) == sorted(settings.COMPONENTS)  # every component has its table, once


def test_a_generated_table_changes_with_the_table() -> None:
    # A negative control: the doc check would notice an edited row.
    text = docs.DOC.read_text()
    assert docs.rewrite(text.replace("| `MEDIA_BUCKET` | (required) |", "| `MEDIA_BUCKET` | 7 |")) == text


@pytest.mark.parametrize("component", sorted(CLASSES))
def test_each_class_reads_the_tables_variables_for_its_component(component: str) -> None:
    contract = CLASSES[component]
    as_is = READ_AS_IS if component == settings.FACEFUSION else set()
    others = {setting for setting in settings.read_by(component) if setting.library}  # Powertools'
    assert names(contract) == set(settings.read_by(component)) - as_is - others, contract.__name__
    table = {str(setting): setting for setting in settings.TABLE}
    hints = typing.get_type_hints(contract)
    for field in contract.__dataclass_fields__.values():
        if "env" in field.metadata:
            setting = table[field.metadata["env"]]
            where = f"{contract.__name__}.{field.name}"
            assert field.default == setting.default_for(component), f"{where}: its default is the table's"
            assert _base(hints[field.name]) == setting.kind, f"{where}: its type is the table's, {setting.kind}"


def test_template_yaml_sets_only_variables_the_table_gives_the_part_it_configures() -> None:
    resources = load_template()["Resources"]
    table = {str(setting): setting for setting in settings.TABLE}
    functions = [spec["Properties"] for spec in resources.values() if spec["Type"] == "AWS::Serverless::Function"]
    assert {properties["Handler"] for properties in functions} == set(HANDLERS)
    for properties in functions:
        component = HANDLERS[properties["Handler"]]
        for name in set(properties.get("Environment", {}).get("Variables", {})):
            assert name in table, f"{properties['Handler']} sets {name}, which the table does not declare"
            assert component in table[name].read_by, f"{properties['Handler']} sets {name}, not read by {component}"
    containers = [
        container
        for spec in resources.values()
        if spec["Type"] == "AWS::ECS::TaskDefinition"
        for container in spec["Properties"]["ContainerDefinitions"]
    ]
    assert len(containers) >= 2  # render and merge
    on_a_worker = {settings.WORKER, settings.FACEFUSION}
    for container in containers:
        for item in container.get("Environment", []):
            name = item["Name"]
            assert name in table and on_a_worker & set(table[name].read_by), f"{container['Name']} sets {name}"


def _options(parser: argparse.ArgumentParser) -> set[str]:
    found = {option for action in parser._actions for option in action.option_strings}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _options(sub)
    return found


def _local_up() -> argparse.ArgumentParser:
    (commands,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    (local,) = [a for a in commands.choices["local"]._actions if isinstance(a, argparse._SubParsersAction)]
    up: argparse.ArgumentParser = local.choices["up"]
    return up


def test_every_flag_the_table_names_exists() -> None:
    worker = argparse.ArgumentParser()
    worker_config.add_arguments(worker)
    parsers = {"worker": _options(worker), "local up": _options(_local_up()), "cli": _options(build_parser())}
    flags = [(setting, c, setting.flag_for(c)) for setting in settings.TABLE for c in setting.read_by]
    assert len([flag for *_, flag in flags if flag]) >= 25
    for setting, component, flag in flags:
        if flag is None:
            continue
        where = "local up" if flag.startswith("local up ") else "worker" if component == settings.WORKER else "cli"
        option = flag.removeprefix("local up ")
        assert option in parsers[where], f"{setting}: {flag} is not a flag of {where}"


# Each component's process in the local stack (fleetctl.local.processes.ProcessEnvironments).
PROCESSES = {settings.SLICER: "slicer", settings.WATCHDOG: "watchdog", settings.WORKER: "render",
             settings.API: "api", settings.JOB_EVENTS: "job_events"}  # fmt: skip
FLAG_VALUES: dict[Any, str] = {int: "7", float: "3.5", str: "copy", Path: "/tmp/flag-check.json"}


def test_each_local_up_flag_the_table_names_sets_its_variable_in_that_components_process() -> None:
    # GIVEN a stack's resources, and each `local up --x` flag the table names, given a value no default has
    resources = StackResources(
        stage="local", media_bucket="media", work_bucket="work", ingest_queue_url="q/ingest",
        ingest_dlq_url="q/ingest-dlq", render_queue_urls=("q/high", "q/normal", "q/low"), render_dlq_url="q/rdlq",
        merge_queue_url="q/merge", merge_dlq_url="q/mdlq", topic_arn="arn:t", state_machine_arn="arn:m",
        webhook_queue_url="q/webhooks.fifo",
    )  # fmt: skip
    checked = 0
    for setting in settings.TABLE:
        for component in setting.read_by:
            flag = setting.flag_for(component) or ""
            if not flag.startswith("local up "):
                continue
            option = flag.removeprefix("local up ")
            off = setting.kind is bool  # the flags of a setting on by default turn it off
            argv = ["local", "up", "--no-" + option.removeprefix("--")] if off else ["local", "up", option]
            argv += [] if off else [FLAG_VALUES[setting.kind]]
            # WHEN `local up` builds its processes' environments from what the flag asked for
            envs = process_environments(up_options(build_parser().parse_args(argv)), resources, Path("/scratch"))
            # THEN the component's process is given the variable, with that value
            given = getattr(envs, PROCESSES[component]).get(setting)
            assert given == ("0" if off else FLAG_VALUES[setting.kind]), f"{' '.join(argv)}: {component} {setting}"
            checked += 1
    assert checked >= 16
