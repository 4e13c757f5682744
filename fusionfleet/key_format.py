"""A bucket key format declared once and read both ways: `KeyFormat(template).key(...)` builds a key,
`.parse(key)` gives back the fields that built it (None for any other key). Pure.

A template is literal text with fields and optional parts:
- `{job}`: one path segment, given and read as str; the field's name says what it may hold (SEGMENTS:
  a job or batch id never starts with "_", a tenant is a tenant name, `rest` is anything to the end);
- `{index:05d}`: a whole number written with at least that many digits, given and read as int;
- `{kind:mp4|png}`: one of the listed words;
- `[.c{copy:01d}]`: written only when its one field (a number or a word) is truthy, read back as 0 or ""
  when absent; an optional number is never written as 0, so it reads back as 1 or more.
So the layout modules spell each format once and no parser repeats it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# What a name field may hold. Job ids never start with "_": records that are not jobs live under `work/_…/`.
_JOB_ID = r"[^/_][^/]*"
SEGMENTS = {
    "job": _JOB_ID,
    "batch": _JOB_ID,
    "event": _JOB_ID,  # a webhook event's name; the job's webhook state is `_state`
    "name": r"[^/]+",
    "ext": r"[a-z0-9]+",
    "tenant": r"[a-z0-9][a-z0-9-]{0,31}",  # fusionfleet.layout.TENANT_NAME
    "month": r"\d{4}-\d{2}",
    "rest": r".*",  # whatever follows a prefix
}
_FIELD = re.compile(r"\{(?P<name>[a-z_]+)(?::(?P<spec>0\d+d|[a-z0-9|]+))?\}")
_PART = re.compile(r"\[(?P<body>[^\[\]]*)\]")


@dataclass(frozen=True)
class _Field:
    name: str
    width: int | None  # a number's least digits; None for a name or a word
    words: tuple[str, ...] = ()

    def pattern(self, optional: bool) -> str:
        if self.width is not None:
            digits = r"[1-9]\d*" if optional else rf"\d{{{self.width},}}"
            return f"(?P<{self.name}>{digits})"
        if self.words:
            return f"(?P<{self.name}>{'|'.join(map(re.escape, self.words))})"
        return f"(?P<{self.name}>{SEGMENTS.get(self.name, SEGMENTS['name'])})"

    def write(self, value: object) -> str:
        if self.width is not None:
            return f"{int(value):0{self.width}d}"  # type: ignore[call-overload]  # ints and numeric strings
        text = str(value)
        if self.words and text not in self.words:
            raise ValueError(f"{self.name} must be one of {', '.join(self.words)}, not {text!r}")
        return text

    def read(self, text: str | None) -> int | str:
        if self.width is not None:
            return int(text) if text else 0
        return text or ""


def _field(match: re.Match[str]) -> _Field:
    spec = match["spec"]
    if spec and spec.startswith("0") and spec.endswith("d"):
        return _Field(match["name"], int(spec[1:-1]))
    return _Field(match["name"], None, tuple(spec.split("|")) if spec else ())


class KeyFormat:
    """One key format; see the module's docstring for the template's grammar."""

    def __init__(self, template: str) -> None:
        self.template = template
        self._pieces: list[tuple[str, list[str | _Field]]] = []  # ("" required | "?" optional, pieces)
        self.fields: dict[str, _Field] = {}
        regex = []
        for optional, text in _split_parts(template):
            pieces = _pieces(text)
            fields = [piece for piece in pieces if isinstance(piece, _Field)]
            if optional and len(fields) != 1:
                raise ValueError(f"an optional part holds exactly one field: [{text}] in {template!r}")
            for piece in fields:
                if piece.name in self.fields:
                    raise ValueError(f"field {piece.name!r} twice in {template!r}")
                self.fields[piece.name] = piece
            body = "".join(
                piece.pattern(optional) if isinstance(piece, _Field) else re.escape(piece) for piece in pieces
            )
            regex.append(f"(?:{body})?" if optional else body)
            self._pieces.append(("?" if optional else "", pieces))
        self._regex = re.compile("^" + "".join(regex) + "$")

    def key(self, **values: object) -> str:
        """The key for these fields; an optional part's field may be left out (absent)."""
        missing = [name for name in self.fields if name not in values and not self._is_optional(name)]
        unknown = [name for name in values if name not in self.fields]
        if missing or unknown:
            raise TypeError(f"{self.template!r}: missing {missing}, unknown {unknown}")
        out: list[str] = []
        for kind, pieces in self._pieces:
            if kind and not all(values.get(piece.name) for piece in pieces if isinstance(piece, _Field)):
                continue
            out.extend(piece.write(values[piece.name]) if isinstance(piece, _Field) else piece for piece in pieces)
        return "".join(out)

    def parse(self, key: str) -> dict[str, int | str] | None:
        """The fields `key` was built from, or None when it is not a key of this format."""
        match = self._regex.match(key)
        if match is None:
            return None
        return {name: field.read(match[name]) for name, field in self.fields.items()}

    def _is_optional(self, name: str) -> bool:
        return any(
            kind and any(isinstance(p, _Field) and p.name == name for p in pieces) for kind, pieces in self._pieces
        )


def _split_parts(template: str) -> list[tuple[bool, str]]:
    parts: list[tuple[bool, str]] = []
    position = 0
    for match in _PART.finditer(template):
        if match.start() > position:
            parts.append((False, template[position : match.start()]))
        parts.append((True, match["body"]))
        position = match.end()
    if position < len(template):
        parts.append((False, template[position:]))
    return parts


def _pieces(text: str) -> list[str | _Field]:
    pieces: list[str | _Field] = []
    position = 0
    for match in _FIELD.finditer(text):
        if match.start() > position:
            pieces.append(text[position : match.start()])
        pieces.append(_field(match))
        position = match.end()
    if position < len(text):
        pieces.append(text[position:])
    return pieces
