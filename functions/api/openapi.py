"""docs/openapi.json, the tenant API's document, written from the routes (functions.api.routes.document).

    python -m functions.api.openapi            # rewrites docs/openapi.json
    python -m functions.api.openapi --check    # exit 1 when the committed one differs

A test regenerates it and fails on drift (tests/unit/test_openapi.py); the API also serves it at
GET /openapi.json, without a token.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from functions.api.routes import document

COMMITTED = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


def text() -> str:
    """The document as committed: indented, keys in the order generated, a final newline."""
    return json.dumps(document(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m functions.api.openapi", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare with the committed document")
    args = parser.parse_args(argv)
    if args.check:
        same = COMMITTED.exists() and COMMITTED.read_text(encoding="utf-8") == text()
        print(f"{COMMITTED} is {'up to date' if same else 'stale: run python -m functions.api.openapi'}")
        return 0 if same else 1
    COMMITTED.write_text(text(), encoding="utf-8")
    print(f"wrote {COMMITTED}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
