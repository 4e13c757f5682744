"""Start LocalStack (`python -m localstack.runtime.main`) with its JSONPath parses memoised.

Runs in LocalStack's own environment (Python 3.13), not the project's: it imports nothing of ours.

LocalStack's Step Functions parses every JSONPath expression each time it evaluates one
(`jsonpath_ng.ext.parse`, a PLY grammar: about 12 ms a parse on a loaded 2-core machine, measured
with its `extract_json`), and a Distributed Map item evaluates about ten (its ItemSelector, the
priority Choice, the task's Parameters, heartbeat and timeout paths). The items of a Map run start
together in threads, so the first segment reached the render queue only after every item of the
first batch had done its parsing: 3 s for 12 items (benchmarks/results/fleet-overhead-before.json,
`first_dispatch`), where AWS starts them at its own pace. The parsed expressions are immutable, and
`find`/`update` leave them unchanged, so one parse per distinct path serves every evaluation.
"""

from __future__ import annotations

import functools
import importlib
import runpy
from typing import Any

MEMO_SIZE = 4096


def memoise_jsonpath() -> None:
    """Replace jsonpath_ng's `parse` functions by memoised ones, before LocalStack imports them by name."""
    for name in ("jsonpath_ng", "jsonpath_ng.ext"):
        module: Any = importlib.import_module(name)
        module.parse = functools.lru_cache(maxsize=MEMO_SIZE)(module.parse)


if __name__ == "__main__":
    memoise_jsonpath()
    runpy.run_module("localstack.runtime.main", run_name="__main__", alter_sys=True)
