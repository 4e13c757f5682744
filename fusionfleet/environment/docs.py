"""`python -m fusionfleet.environment.docs`: writes docs/configuration.md's tables from the settings table.

Each table follows a marker line `<!-- settings: COMPONENT -->` and lists the variables that component
reads, in the table's order; the prose around the tables is the doc's own. `--check` exits 1 when the
file differs from what would be written (tests/static/test_config_table.py checks the same).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from fusionfleet.environment.settings import COMPONENTS, read_by

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
MARKER = re.compile(r"^<!-- settings: (\w+) -->$")


def table(component: str) -> list[str]:
    """The markdown table of `component`'s variables (a flag column where one of them has a flag)."""
    rows = read_by(component)
    flags = any(setting.flag_for(component) for setting in rows)
    head = ["variable", "default", *(["flag"] if flags else []), "meaning"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for setting in rows:
        flag = setting.flag_for(component)
        cells = [f"`{setting}`", setting.shown_for(component)]
        if flags:
            cells.append(f"`{flag}`" if flag else "")
        cells.append(setting.doc_for(component))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def rewrite(text: str) -> str:
    """`text` with the table after each marker replaced by the generated one."""
    out: list[str] = []
    lines = iter(text.splitlines())
    for line in lines:
        out.append(line)
        marker = MARKER.match(line)
        if marker is None:
            continue
        component = marker.group(1)
        if component not in COMPONENTS:
            raise ValueError(f"{DOC.name}: no component {component!r} (one of {', '.join(COMPONENTS)})")
        out.extend(["", *table(component)])  # a blank line: the table is a block of its own
        seen = False
        for rest in lines:  # skip the old table (and the blank line before it), keep what follows it
            seen = seen or rest.startswith("|")
            if not rest.startswith("|") and (seen or rest.strip()):
                out.append(rest)
                break
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is not what would be written")
    args = parser.parse_args(argv)
    text = DOC.read_text()
    wanted = rewrite(text)
    if args.check:
        if wanted != text:
            print(f"{DOC} is out of date: run python -m fusionfleet.environment.docs", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
