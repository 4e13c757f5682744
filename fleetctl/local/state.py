"""What `fusionfleet local up` started: written to a JSON file so `down` and `status` find it by pid."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

# The admission limits a state records (`UpOptions`' fields of these names).
LIMITS = ("max_running_jobs", "tenant_max_running_jobs", "tenant_max_segments")


@dataclass(frozen=True)
class ManagedProcess:
    role: str
    name: str
    pid: int
    log: str

    def alive(self) -> bool:
        """Running and still our process (a recycled pid would have another command line)."""
        try:
            os.kill(self.pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        try:
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes()
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return True
        marker = self.name.encode() if self.role not in ("localstack",) else b"localstack"
        return is_ours(cmdline, stat, marker)


def is_ours(cmdline: bytes, stat: str, marker: bytes) -> bool:
    """Whether a live pid's /proc entries are the process we started (`marker` in its command line).

    An empty command line is a process still inside exec: Popen returns once the new image has replaced
    the old one, a moment before the kernel shows its arguments, so `local up` checking at once must
    not take its fresh process for dead (seen as "the api exited at start" with an empty log).
    """
    if stat.split(") ", 1)[-1].startswith("Z"):
        return False
    return not cmdline or marker in cmdline


@dataclass
class LocalState:
    port: int
    region: str
    stack: str
    outputs: dict[str, str] = field(default_factory=dict)
    processes: list[ManagedProcess] = field(default_factory=list)
    dashboard_url: str | None = None
    api_url: str | None = None
    # What its render workers run and what a job naming no engine gets, for `submit` to check
    # (fleetctl/local/engines.py); empty in a state file written before they were recorded.
    engines: list[str] = field(default_factory=list)
    default_engine: str | None = None
    # The admission limits its slicer, watchdog and notice follower run with (`UpOptions`' names), so the
    # CLI and the dashboard admit a retried job with them too (fleetctl.admission); empty in an older file.
    limits: dict[str, int] = field(default_factory=dict)
    # The fleet its slicer sizes plans for (`local up --max-workers`); 0: the fixed 4 s plan (no autoscaler).
    fleet_max_workers: int = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def by_role(self, role: str) -> list[ManagedProcess]:
        return [p for p in self.processes if p.role == role]

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(asdict(self), indent=2))
        temporary.replace(path)

    @classmethod
    def load(cls, path: Path) -> LocalState | None:
        if not path.is_file():
            return None
        data = json.loads(path.read_text())
        return cls(
            port=int(data["port"]),
            region=data["region"],
            stack=data["stack"],
            outputs=dict(data.get("outputs", {})),
            processes=[ManagedProcess(**item) for item in data.get("processes", [])],
            dashboard_url=data.get("dashboard_url"),
            api_url=data.get("api_url"),
            engines=list(data.get("engines", [])),
            default_engine=data.get("default_engine"),
            limits={str(k): int(v) for k, v in data.get("limits", {}).items()},
            fleet_max_workers=int(data.get("fleet_max_workers", 0)),
        )
