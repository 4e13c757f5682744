"""A tenant's drop against the in-memory fakes: the buckets, the slicer, its notices, and media with a manifest."""

from __future__ import annotations

import json
from pathlib import Path

from fleetctl.samples import grace_hopper_path
from fusionfleet import layout
from fusionfleet.fleet.tenants import TenantLimits
from fusionfleet.services.slicing import Slicer
from tests.support.fakes import FakeNotifier, FakeOrchestrator, FakeStorage
from tests.support.jobs import slicer_config, tenant_fields

MEDIA, WORK = "media", "work"
MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:render"
TOPIC = "arn:aws:sns:us-east-1:123456789012:notifications"


def face_bytes() -> bytes:
    return grace_hopper_path().read_bytes()


def make_slicer(limits: TenantLimits | None = None) -> tuple[Slicer, FakeStorage, FakeOrchestrator]:
    storage, orchestrator, notifier = FakeStorage(), FakeOrchestrator(), FakeNotifier()
    slicer = Slicer(
        storage, orchestrator, notifier, slicer_config(WORK, MACHINE, TOPIC, **tenant_fields(limits or TenantLimits()))
    )
    return slicer, storage, orchestrator


def notices(slicer: Slicer) -> list[dict[str, object]]:
    assert isinstance(slicer.notifier, FakeNotifier)
    return [message for _topic, _subject, message in slicer.notifier.published]


def drop(storage: FakeStorage, clip: Path, tenant: str | None, manifest: dict[str, object] | None = None) -> str:
    """Media and a manifest in `tenant`'s drop (or the plain jobs/ drop); returns the manifest key."""
    home = layout.tenant_prefix(tenant) if tenant else ""
    storage.put_bytes(MEDIA, f"{home}inputs/face.jpg", face_bytes())
    storage.put_bytes(MEDIA, f"{home}inputs/clip.mp4", clip.read_bytes())
    body = manifest or {"version": 1, "source": [f"{home}inputs/face.jpg"], "target": f"{home}inputs/clip.mp4"}
    key = f"{home}jobs/clip.json"
    storage.put_bytes(MEDIA, key, json.dumps(body).encode())
    return key
