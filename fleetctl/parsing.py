"""The CLI's argument parser: a usage error is one line, not the whole usage.

`submit --help` lists some hundred flags (FaceFusion's catalogue), so argparse's habit of printing the
whole usage before an error buries the error. `FleetParser` says what is wrong in one line and exits
with `Exit.USAGE`: a flag FaceFusion knows but the fleet sets itself (`--execution-providers`) is named
with the reason, and an unknown flag is answered with the nearest one the command takes.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from fleetctl.exits import Exit
from fusionfleet.facefusion.options import SYSTEM_OPTIONS

# Why the fleet, not the job, sets each FaceFusion option a job may not carry (catalogue.SYSTEM_OPTIONS).
_OWNED_BECAUSE = {
    "config_path": "workers run FaceFusion with their own settings, not an ini file",
    "temp_path": "each worker keeps its own scratch folder",
    "jobs_path": "each worker keeps its own scratch folder",
    "source_pattern": "for a batch, repeat -t/--target or name a folder or a quoted glob",
    "target_pattern": "for a batch, repeat -t/--target or name a folder or a quoted glob",
    "output_pattern": "a batch's outputs are named after its targets (--output-dir)",
    "execution_device_ids": "each worker sets it for its own GPU",
    "execution_providers": "each worker sets it for its own GPU",
    "execution_thread_count": "each worker sets it for its own GPU",
    "video_memory_strategy": "each worker sets it for its own GPU",
    "download_providers": "the worker image carries its models",
    "download_scope": "the worker image carries its models",
    "benchmark_mode": "it belongs to FaceFusion's benchmark command, not to a job",
    "benchmark_resolutions": "it belongs to FaceFusion's benchmark command, not to a job",
    "benchmark_cycle_count": "it belongs to FaceFusion's benchmark command, not to a job",
    "open_browser": "it belongs to FaceFusion's UI, not to a job",
    "ui_layouts": "it belongs to FaceFusion's UI, not to a job",
    "ui_workflow": "it belongs to FaceFusion's UI, not to a job",
    "log_level": "workers log at their own level; `fusionfleet logs JOB` shows every attempt",
    "halt_on_error": "a segment that fails is retried, then fails its job with the reason",
}
# FaceFusion's flags for its path options are `--source-paths` etc.; its job-* arguments are positional.
FLEET_OWNED: dict[str, str] = {
    "--" + name.replace("_", "-"): _OWNED_BECAUSE[name] for name in SYSTEM_OPTIONS if name in _OWNED_BECAUSE
}
_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


class FleetParser(argparse.ArgumentParser):
    """argparse with one-line usage errors (exit 2), checked flag by flag before the arguments are."""

    def error(self, message: str) -> NoReturn:
        self.exit(Exit.USAGE, f"{self.prog}: error: {message}\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        # A command's own flags only: a parser of subcommands leaves theirs to them.
        if self._subparsers is None:
            self.check_flags(sys.argv[1:] if args is None else list(args))
        return super().parse_known_args(args, namespace)

    def check_flags(self, tokens: list[str]) -> None:
        """The first flag this command does not take, said with why: before argparse's own checks, so a
        misspelt --source is named as such rather than as a missing one."""
        for token in tokens:
            if token == "--":
                return
            if not token.startswith("-") or token == "-" or _NUMBER.match(token):
                continue
            flag = token.split("=", 1)[0]
            if self._takes(flag):
                continue
            if flag in FLEET_OWNED:
                self.error(f"{flag} is the fleet's to set, not a job's: {FLEET_OWNED[flag]}")
            nearest = difflib.get_close_matches(flag, self._flags(), n=1, cutoff=0.6)
            self.error(f"unknown flag {flag}" + (f"; did you mean {nearest[0]}?" if nearest else ""))

    def _flags(self) -> list[str]:
        return [flag for flag in self._option_string_actions if flag.startswith("--")]

    def _takes(self, flag: str) -> bool:
        if flag in self._option_string_actions:
            return True
        if not flag.startswith("--"):
            return flag[:2] in self._option_string_actions  # `-sface.jpg`: a short flag and its value
        # argparse takes a unique prefix of a long flag; an ambiguous one it reports itself.
        return self.allow_abbrev and any(known.startswith(flag) for known in self._flags())
