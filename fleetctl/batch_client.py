"""A batch from the user's side: which files are its targets, uploading them with one manifest, reading it
back, and fetching each item's output into a folder."""

from __future__ import annotations

import glob
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetctl.client import CONTENT_TYPES, build_manifest, job_name, record_accepted
from fusionfleet import layout
from fusionfleet.adapters.orchestrator import Orchestrator
from fusionfleet.adapters.storage import Storage
from fusionfleet.errors import FusionFleetError
from fusionfleet.fleet.tenants import check_tenant_name
from fusionfleet.jobs.batch_reader import BatchReader
from fusionfleet.jobs.batch_views import BatchDetail
from fusionfleet.jobs.batches import MEDIA_EXTENSIONS
from fusionfleet.jobs.ids import batch_id as derive_batch_id
from fusionfleet.jobs.image_output import extension_of
from fusionfleet.jobs.reader import JobReader
from fusionfleet.jobs.states import JobState
from fusionfleet.messages import ObjectRef

GLOB_CHARACTERS = frozenset("*?[")


def target_files(named: list[str]) -> list[Path]:
    """The files `--target` names: a file as given, a folder's media files (by extension, sorted, not its
    subfolders), a glob's matches (sorted; quoted so the shell leaves it to us). Each file once."""
    found: list[Path] = []
    for entry in named:
        if GLOB_CHARACTERS & set(entry):
            matches = sorted(Path(match) for match in glob.glob(entry) if Path(match).is_file())
            if not matches:
                raise FusionFleetError(f"--target {entry!r} matches no file")
            found.extend(matches)
        elif Path(entry).is_dir():
            media = sorted(
                path for path in Path(entry).iterdir() if path.is_file() and extension_of(path.name) in MEDIA_EXTENSIONS
            )
            if not media:
                raise FusionFleetError(f"--target {entry!r} is a folder with no images or videos in it")
            found.extend(media)
        elif Path(entry).is_file():
            found.append(Path(entry))
        else:
            raise FusionFleetError(f"--target {entry!r} is neither a file, a folder nor a glob that matches files")
    unique: list[Path] = []
    for path in found:
        if path.resolve() not in {seen.resolve() for seen in unique}:
            unique.append(path)
    return unique


def is_batch(named: list[str]) -> bool:
    """One plain file is a job; several targets, a folder or a glob make a batch."""
    return len(named) != 1 or bool(GLOB_CHARACTERS & set(named[0])) or Path(named[0]).is_dir()


@dataclass(frozen=True)
class BatchSubmission:
    batch_id: str
    manifest_key: str
    output_prefix: str
    targets: int


def upload_names(targets: list[Path]) -> list[str]:
    """Each target's file name in the batch's upload folder: its own, with its index where two share one."""
    names: list[str] = []
    for index, path in enumerate(targets):
        name = path.name
        names.append(f"{index:04d}-{name}" if name in names else name)
    return names


class BatchClient:
    def __init__(
        self, storage: Storage, orchestrator: Orchestrator, media_bucket: str, work_bucket: str, machine: str
    ) -> None:
        self._storage = storage
        self._orchestrator = orchestrator
        self._media = media_bucket
        self._work = work_bucket
        self._reader = BatchReader(JobReader(storage, orchestrator, work_bucket, machine))

    def submit(
        self, sources: list[Path], targets: list[Path], priority: str = "normal", engine: str | None = None,
        quality: str | None = None, reference: Path | None = None, options: dict[str, Any] | None = None,
        name: str | None = None, say: Callable[[str], None] = lambda _line: None, tenant: str | None = None,
        item_notices: bool = False,
    ) -> BatchSubmission:  # fmt: skip
        """Upload the faces and every target under inputs/<name>/, then the batch's manifest (the trigger)."""
        if tenant is not None:
            check_tenant_name(tenant)
        for path in [*sources, *([reference] if reference else [])]:
            if not path.is_file():
                raise FusionFleetError(f"{path} is not a file")
        name = name or job_name(targets[0].parent if len(targets) > 1 else targets[0])
        tags = dict([layout.INPUT_RETENTION_TAG]) if tenant is not None else None

        def upload(path: Path, file_name: str) -> str:
            key = layout.input_key(name, file_name, tenant)
            say(f"uploading {path} → s3://{self._media}/{key}")
            content_type = CONTENT_TYPES.get(path.suffix.lower(), "application/octet-stream")
            self._storage.upload_file(self._media, key, path, content_type, tags)
            return key

        source_keys = [upload(path, f"source-{i}{path.suffix.lower()}") for i, path in enumerate(sources)]
        target_keys = [
            upload(path, f"targets/{file}") for path, file in zip(targets, upload_names(targets), strict=True)
        ]
        reference_key = upload(reference, f"reference{reference.suffix.lower()}") if reference else None
        manifest_key = layout.manifest_key(name, tenant)
        prefix = layout.default_output_prefix(manifest_key)
        manifest = build_manifest(source_keys, "", prefix, priority, engine, quality, reference_key, options or {})
        del manifest["target"]
        manifest["targets"] = target_keys
        if item_notices:
            manifest["item_notices"] = True
        etag = self._storage.put_bytes(
            self._media, manifest_key, json.dumps(manifest, indent=2).encode(), "application/json"
        )
        batch_id = derive_batch_id(self._media, manifest_key, etag)
        # Before the id is shown: the batch reads PENDING, not unknown, until the slicer opens it.
        ref = ObjectRef(bucket=self._media, key=manifest_key, etag=etag)
        record_accepted(self._storage, self._work, batch_id, ref, manifest, say)
        say(f"submitted s3://{self._media}/{manifest_key}: a batch of {len(target_keys)} targets")
        return BatchSubmission(batch_id, manifest_key, prefix, len(target_keys))

    def detail(self, batch: str) -> BatchDetail:
        return self._reader.detail(batch)

    def download(
        self, detail: BatchDetail, folder: Path, say: Callable[[str], None] = lambda _line: None
    ) -> list[Path]:
        """Each succeeded item's output into `folder`, under its name in the batch's output prefix."""
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        for item in detail.items:
            job = item.job
            if job is None or job.state is not JobState.SUCCEEDED or job.output_object is None:
                continue
            bucket, key = job.output_object
            path = folder / key.rsplit("/", 1)[-1]
            self._storage.download_file(bucket, key, path)
            say(f"item {item.index}: {item.target} → {path}")
            written.append(path)
        return written
