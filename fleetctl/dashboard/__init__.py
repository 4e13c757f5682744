"""The live dashboard: a page and a JSON API over the stack, served on loopback by the local stack."""

from fleetctl.dashboard.server import DashboardServer
from fleetctl.dashboard.source import DashboardSource, JobNotFound

__all__ = ["DashboardServer", "DashboardSource", "JobNotFound"]
