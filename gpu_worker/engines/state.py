"""An engine's temporal state as bytes: JSON fields plus exact arrays, in one NumPy archive.

No pickle: the bytes come back from storage, so loading them must never run code.
"""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from gpu_worker.engines.base import StateUnreadable

Arrays = dict[str, npt.NDArray[Any]]
_FIELDS = "__fields__"


def pack(fields: dict[str, Any], arrays: Arrays) -> bytes:
    buffer = io.BytesIO()
    encoded = np.frombuffer(json.dumps(fields, sort_keys=True).encode(), dtype=np.uint8)
    # cast: the stubs read named arrays as savez's own keyword `allow_pickle`.
    cast(Any, np.savez_compressed)(buffer, **{_FIELDS: encoded}, **arrays)
    return buffer.getvalue()


def unpack(blob: bytes) -> tuple[dict[str, Any], Arrays]:
    try:
        with np.load(io.BytesIO(blob), allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
        fields = json.loads(arrays.pop(_FIELDS).tobytes().decode())
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, UnicodeDecodeError) as error:
        raise StateUnreadable(f"engine state unreadable: {error}") from error
    if not isinstance(fields, dict):
        raise StateUnreadable("engine state unreadable: its fields are not an object")
    return fields, arrays
