"""A job's files under `segments/`, sorted into outputs, records and attempt records: which segments
are done (an output and its record) and failed (a record alone). The read model, cancel and retry, and
the webhook deliverer's progress count segments through it, so they cannot disagree. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from fusionfleet import layout


@dataclass(frozen=True)
class SegmentFiles:
    """The job's files under segments/: segment outputs, their records, the attempt records."""

    outputs: frozenset[int] = frozenset()
    records: frozenset[int] = frozenset()
    attempts: tuple[tuple[int, int, int, str], ...] = ()  # (segment, run, attempt, key)

    @classmethod
    def of(cls, keys: list[str]) -> SegmentFiles:
        outputs: set[int] = set()
        records: set[int] = set()
        attempts: list[tuple[int, int, int, str]] = []
        for key in keys:
            if (segment := layout.parse_segment_file(key)) is not None:
                (outputs if segment.is_output else records).add(segment.index)
            elif (attempt := layout.parse_attempt_record_key(key)) is not None:
                attempts.append((attempt.index, attempt.run, attempt.attempt, key))
        return cls(frozenset(outputs), frozenset(records), tuple(sorted(attempts)))

    @property
    def done(self) -> frozenset[int]:
        return self.outputs & self.records

    @property
    def failed(self) -> frozenset[int]:
        return self.records - self.outputs
