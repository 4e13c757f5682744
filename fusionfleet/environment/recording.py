"""Recording every AWS call a process makes, as the role its AWS counterpart has (a test instrument).

The local stack sets these per process (fleetctl/local/supervisor.py); with both set, every boto3
client made by `fusionfleet.adapters.aws.AwsTarget` appends one JSON line per call to a file under the
folder, which the IAM judge (tests/support/iam/) evaluates against that role's policies.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fusionfleet.environment import settings

read = settings.reader(settings.RECORDING)


@dataclass(frozen=True)
class IamRecordingEnvironment:
    record_dir: Path | None = read(settings.FUSIONFLEET_IAM_RECORD_DIR)  # noqa: RUF009  (None)
    # The template's logical id of the role (or policy) the process's AWS counterpart runs as.
    role: str | None = read(settings.FUSIONFLEET_IAM_ROLE)
    # The process's name in the judge's report; without it, the value of its `--name` argument.
    process: str | None = read(settings.FUSIONFLEET_IAM_PROCESS)
