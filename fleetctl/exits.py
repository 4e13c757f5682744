"""The exit statuses of the CLI's job commands, defined once: every command returns one of these, and the
help of every job command lists them (`EPILOG`), so a script can tell a refused job from a failed one
and from a wait that gave up."""

from __future__ import annotations

from enum import IntEnum

from fusionfleet.errors import FusionFleetError
from fusionfleet.jobs.states import JobState


class Exit(IntEnum):
    DONE = 0  # the job succeeded, or the command did what it was asked
    FAILED = 1  # the job failed or was cancelled, or the command could not do what was asked
    USAGE = 2  # the command line is wrong (argparse's own status for it)
    REJECTED = 3  # the job was refused for what it asks, here before any upload or by the farm
    GAVE_UP = 4  # the wait ended before the job did; the job goes on


EPILOG = """exit status:
  0  done: the job succeeded, or the command did what it was asked
  1  failed: the job failed or was cancelled, or the command could not do it (an unknown job, an action
     its state does not allow, a stack that does not answer)
  2  usage: the command line is wrong (an unknown flag, a flag the fleet owns, a file that is not there)
  3  rejected: the job was refused for what it asks (its options, its media, an engine no worker runs),
     here before any upload or by the farm
  4  gave up waiting: --timeout passed before the job ended; the job goes on (`fusionfleet wait JOB`)"""


class UsageError(FusionFleetError):
    """The command line names something that cannot be used (a file that is not there): exit 2."""


def of_state(state: JobState) -> Exit:
    """A job's state as an exit status: a job still queued or running is not a failure of the command."""
    if state is JobState.REJECTED:
        return Exit.REJECTED
    return Exit.FAILED if state.unsuccessful else Exit.DONE
