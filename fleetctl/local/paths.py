"""Where the local stack keeps its state, logs and LocalStack's environment.

The entry point hands in the environment (`discover(env=os.environ)`); nothing here reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fusionfleet.environment.settings import FUSIONFLEET_LOCAL_DIR, FUSIONFLEET_LOCALSTACK_PYTHON


def project_root() -> Path:
    """The checkout holding template.yaml (the local stack deploys the same template as AWS)."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "template.yaml").is_file() and (parent / "infra").is_dir():
            return parent
    raise FileNotFoundError("template.yaml not found above fleetctl/: run from a FusionFleet checkout")


@dataclass(frozen=True)
class LocalPaths:
    root: Path
    state_dir: Path
    localstack_python_override: Path | None = None

    @classmethod
    def discover(cls, state_dir: Path | None = None, *, env: Mapping[str, str]) -> LocalPaths:
        root = project_root()
        chosen = state_dir or Path(env.get(FUSIONFLEET_LOCAL_DIR) or root / ".fusionfleet" / "local")
        configured = env.get(FUSIONFLEET_LOCALSTACK_PYTHON)
        return cls(root=root, state_dir=chosen, localstack_python_override=Path(configured) if configured else None)

    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    @property
    def autoscaler_status(self) -> Path:
        return self.state_dir / "autoscaler.json"

    @property
    def logs(self) -> Path:
        return self.state_dir / "logs"

    @property
    def localstack_volume(self) -> Path:
        return self.state_dir / "localstack"

    @property
    def scratch(self) -> Path:
        return self.state_dir / "scratch"

    @property
    def template(self) -> Path:
        return self.root / "template.yaml"

    @property
    def localstack_python(self) -> Path:
        return self.localstack_python_override or self.root / ".venv-localstack" / "bin" / "python"

    @property
    def localstack_launcher(self) -> Path:
        return self.root / "infra" / "localstack" / "launch.py"

    @property
    def event_source_runner(self) -> Path:
        return self.root / "infra" / "emulators" / "event_source.py"

    @property
    def schedule_runner(self) -> Path:
        return self.root / "infra" / "emulators" / "schedule.py"
