"""The job commands through the tenant HTTP API (`--api URL --token T`, or FUSIONFLEET_API_URL and
FUSIONFLEET_TOKEN): `status`, `list`, `cancel`, `retry`, `logs`, `wait` and `download`, and `submit` of a
batch, for a tenant that has a token and no AWS credentials.

They read what the API answers (`functions/api/routes.py`: the read model's views as `tenant_json` and
`tenant_item_json` shape them) and render it as the bucket path's commands do; `--json` prints the
API's own answer. The token names the tenant (the API serves no other), so `--tenant` is only checked
against it.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import os
import time
import urllib.parse
from datetime import datetime
from pathlib import Path
from typing import Any

from fleetctl.api_client import ApiClient, ApiError, download, ended
from fleetctl.exits import Exit, UsageError, of_state
from fleetctl.job_commands import print_attempts, say
from fleetctl.tables import duration, table
from fusionfleet.environment.api import ApiEnvironment
from fusionfleet.environment.settings import FUSIONFLEET_API_URL, FUSIONFLEET_TOKEN
from fusionfleet.jobs.states import JobState, SegmentState, parse_state
from fusionfleet.jobs.views import AttemptView
from fusionfleet.progress import ProgressLine, bar

# The claim the API reads the tenant from (its default; the stack's TENANT_CLAIM may rename it).
TENANT_CLAIM = ApiEnvironment.tenant_claim
# Pages read for `list --state` (the API filters by nothing), and each page's size: a bound on requests.
LIST_PAGES = 10
ITEM_PAGE = 500


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--api", metavar="URL", help=f"go through the tenant HTTP API at URL; env {FUSIONFLEET_API_URL}"
    )
    parser.add_argument("--token", help=f"bearer token for --api (it names the tenant); env {FUSIONFLEET_TOKEN}")


def token_tenant(token: str, claim: str = TENANT_CLAIM) -> str | None:
    """The tenant a JWT names, read without checking its signature (the API checks it): None if unreadable."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (binascii.Error, ValueError):
        return None
    value = claims.get(claim) if isinstance(claims, dict) else None
    return value if isinstance(value, str) else None


def api_of(args: argparse.Namespace, env: dict[str, str] | os._Environ[str] = os.environ) -> ApiClient | None:
    """The API client when the command goes through the API (flag > environment), else None.

    A token names its tenant and the API serves that one only: `--tenant` naming another is refused here
    with the reason, rather than answered with the token's tenant's jobs."""
    url = getattr(args, "api", None) or env.get(FUSIONFLEET_API_URL)
    if not url:
        return None
    token = getattr(args, "token", None) or env.get(FUSIONFLEET_TOKEN)
    if not token:
        raise UsageError(f"--api needs a token: pass --token or set {FUSIONFLEET_TOKEN}")
    asked = getattr(args, "tenant", None)
    if asked:
        named = token_tenant(token)
        if named is None:
            raise UsageError(
                f"--tenant {asked}: through --api the token names the tenant, and this token's "
                f"{TENANT_CLAIM!r} claim cannot be read; leave --tenant out"
            )
        if named != asked:
            raise UsageError(
                f"--tenant {asked}: this token is tenant {named}'s, and the API serves only the token's "
                f"tenant; use a token of {asked}"
            )
    return ApiClient(url, token)


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2), flush=True)


def _segments(job: dict[str, Any]) -> str:
    counts = job.get("segments") or {}
    if not counts.get("total"):
        return "-"
    failed = counts.get(SegmentState.FAILED) or 0
    return f"{counts[SegmentState.DONE]}/{counts['total']}" + (f" ({failed} failed)" if failed else "")


def _age(created_at: object, now: float) -> str:
    if not created_at:
        return "-"
    try:
        return duration(now - datetime.fromisoformat(str(created_at)).timestamp())
    except ValueError:
        return "-"


def _state(job: dict[str, Any]) -> JobState:
    return parse_state(str(job.get("state", ""))) or JobState.FAILED


def output_name(url: str) -> str:
    """A download link's file name: the output object's own name, as the bucket path names a download."""
    return urllib.parse.unquote(urllib.parse.urlparse(url).path.rsplit("/", 1)[-1])


# ---------------------------------------------------------------------------------------------- commands
def cmd_status(args: argparse.Namespace, api: ApiClient) -> int:
    job = api.call("GET", f"/jobs/{args.job_id}")
    if getattr(args, "json", False):
        _print_json(job)
        return of_state(_state(job))
    print(f"{'batch' if job.get('kind') == 'batch' else 'job'}       {job['job_id']}")
    print(f"state     {job['state']}")
    if job.get("priority"):
        print(f"priority  {job['priority']}")
    for target in job.get("targets") or []:
        print(f"target    {target}")
    if job.get("kind") == "batch":
        items = job.get("items") or {}
        print(f"items     {items.get(SegmentState.DONE, 0)} succeeded, "
              f"{items.get(SegmentState.FAILED, 0)} unsuccessful, "
              f"{items.get(SegmentState.RUNNING, 0)} running, {items.get('total', 0)} total")  # fmt: skip
    elif (job.get("segments") or {}).get("total"):
        counts = job["segments"]
        print(
            f"segments  {counts[SegmentState.DONE]} done, {counts[SegmentState.FAILED]} failed, {counts['total']} total"
        )
    if job.get("download_url"):
        print(f"download  {job['download_url']}")
    for frame in job.get("frames") or []:
        print(f"frame     {frame['frame']}: {frame['download_url']}")
    if job.get("reason"):
        print(f"reason    {job['reason']}")
    return of_state(_state(job))


def cmd_list(args: argparse.Namespace, api: ApiClient) -> int:
    if args.tenant == "-":
        raise UsageError("--tenant -: through --api every job is the token's tenant's; there are no others")
    wanted = args.state
    jobs: list[dict[str, Any]] = []
    cursor: str | None = None
    answer: dict[str, Any] = {}
    for _page in range(LIST_PAGES if wanted else 1):
        query = {"limit": str(min(args.limit, 200))} | ({"next": cursor} if cursor else {})
        answer = api.call("GET", "/jobs?" + urllib.parse.urlencode(query))
        jobs.extend(job for job in answer.get("jobs", []) if not wanted or job.get("state") == wanted)
        cursor = answer.get("next")
        if len(jobs) >= args.limit or not cursor:
            break
    jobs = jobs[: args.limit]
    if getattr(args, "json", False):
        _print_json({**answer, "jobs": jobs})
        return Exit.DONE
    if not jobs:
        say("no jobs" + (f" in state {wanted}" if wanted else ""))
        return Exit.DONE
    now = time.time()
    rows = [
        (job["job_id"], job["state"], job.get("priority") or "-", _segments(job), _age(job.get("created_at"), now),
         job.get("reason", ""))
        for job in jobs
    ]  # fmt: skip
    print("\n".join(table(("JOB", "STATE", "PRIORITY", "SEGMENTS", "AGE", "REASON"), rows)))
    return Exit.DONE


def cmd_action(args: argparse.Namespace, api: ApiClient) -> int:
    print(api.call("POST", f"/jobs/{args.job_id}/{args.command}")["message"])
    return Exit.DONE


def cmd_logs(args: argparse.Namespace, api: ApiClient) -> int:
    path = f"/jobs/{args.job_id}/logs"
    if args.segment is not None:
        answer = api.call("GET", f"{path}?segment={args.segment}")
    else:
        answer = api.call("GET", path)
        attempts = list(answer.get("attempts", []))
        while answer.get("next"):  # every page: the bucket path's `logs` shows every attempt too
            answer = api.call("GET", f"{path}?next={urllib.parse.quote(str(answer['next']))}")
            attempts.extend(answer.get("attempts", []))
        answer = {"job_id": args.job_id, "attempts": attempts, "next": None}
    if getattr(args, "json", False):
        _print_json(answer)
        return Exit.DONE
    print_attempts([AttemptView(**item) for item in answer.get("attempts", [])], args.segment)
    return Exit.DONE


def describe(job: dict[str, Any]) -> str:
    if job.get("kind") == "batch":
        items = job.get("items") or {}
        done, total = int(items.get(SegmentState.DONE, 0)), int(items.get("total", 0))
        return f"{job['state']} {bar(done, total)} {done}/{total} items" if total else str(job["state"])
    segments = job.get("segments") or {}
    if not segments.get("total"):
        return str(job["state"])
    done, total = int(segments[SegmentState.DONE]), int(segments["total"])
    return f"{job['state']} {bar(done, total)} {done}/{total} segments"


def follow(api: ApiClient, job_id: str, timeout_s: float) -> dict[str, Any]:
    line = ProgressLine()
    job = api.wait(job_id, timeout_s, lambda current: line.show(describe(current)))
    line.done()
    return job


def cmd_wait(args: argparse.Namespace, api: ApiClient) -> int:
    job = follow(api, args.job_id, args.timeout)
    return fetch(api, job, args.output, args.output_dir, args.timeout)


def cmd_download(args: argparse.Namespace, api: ApiClient) -> int:
    job = api.call("GET", f"/jobs/{args.job_id}")
    if not ended(job):
        say(f"still {job['state']}: nothing to download yet (`fusionfleet wait {args.job_id}` waits for it)")
        return Exit.FAILED
    return fetch(api, job, args.output, args.output_dir, None)


def fetch(
    api: ApiClient | None, job: dict[str, Any], output: Path | None, folder: Path | None, waited: float | None
) -> int:
    """The end of a wait (or a download), said, and its result written: under `output`, else under the
    output's own name in `folder` (here by default), as the bucket path writes it."""
    state = _state(job)
    if not ended(job):
        say(f"gave up waiting: still {job['state']} after {waited or 0:.0f} s; "
             f"`fusionfleet wait {job['job_id']}` goes on")  # fmt: skip
        return Exit.GAVE_UP
    if job.get("kind") == "batch":
        if output is not None:
            raise UsageError(f"{job['job_id']} is a batch: name a folder with --output-dir, not a file")
        if api is None:
            raise UsageError(f"{job['job_id']} is a batch: `fusionfleet download` fetches its items")
        return _fetch_batch(api, job, folder or Path.cwd())
    if state is JobState.SUCCEEDED and job.get("download_url"):
        url = str(job["download_url"])
        say(f"succeeded → {download(url, output or (folder or Path.cwd()) / output_name(url))}")
        return Exit.DONE
    if state is JobState.SUCCEEDED and job.get("frames"):
        for frame in job["frames"]:
            url = str(frame["download_url"])
            say(f"frame {frame['frame']} → {download(url, (folder or Path.cwd()) / output_name(url))}")
        return Exit.DONE
    say(f"{state.lower()}: {job.get('reason') or 'it has no output'}")
    code = of_state(state)
    return Exit.FAILED if code is Exit.DONE else code


def _fetch_batch(api: ApiClient, job: dict[str, Any], folder: Path) -> int:
    first: int | None = 0
    written = 0
    while first is not None:
        detail = api.call("GET", f"/jobs/{job['job_id']}/detail?items_from={first}&items={ITEM_PAGE}&limit=1")
        for item in detail.get("items", []):
            url = item.get("download_url")
            if item.get("state") != JobState.SUCCEEDED or not url:
                continue
            path = download(str(url), folder / (item.get("output") or output_name(str(url))))
            say(f"item {item['index']}: {item['target']} → {path}")
            written += 1
        first = detail.get("next_item")
    total = (job.get("items") or {}).get("total", 0)
    say(f"{str(job['state']).lower()}: {written} of {total} outputs in {folder}")
    if job.get("reason"):
        say(str(job["reason"]))
    return of_state(_state(job))


API_COMMANDS = {
    "status": cmd_status,
    "list": cmd_list,
    "cancel": cmd_action,
    "retry": cmd_action,
    "logs": cmd_logs,
    "wait": cmd_wait,
    "download": cmd_download,
}


def run(args: argparse.Namespace) -> int | None:
    """The command through the API when one is named (None: it goes to the stack itself)."""
    if args.command not in API_COMMANDS:
        return None
    api = api_of(args)
    if api is None:
        return None
    try:
        return API_COMMANDS[args.command](args, api)
    except ApiError as error:
        if error.status == 404 and getattr(args, "job_id", None):
            raise ApiError(404, f"no job {args.job_id!r} of this token's tenant") from error
        raise
