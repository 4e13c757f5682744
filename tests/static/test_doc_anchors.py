"""Every relative link in README.md and docs/*.md lands somewhere: its file exists, and its `#anchor` is
a heading of that page as GitHub names it (lowercased, punctuation dropped, spaces to hyphens, a
repeated heading numbered -1, -2, …) or an explicit `<a id>` / `<a name>`."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^(```|~~~)")
EXPLICIT = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def _prose(text: str) -> list[str]:
    """The page's lines outside fenced code blocks (a `#` in a shell block is no heading)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor of a heading's text (github-slugger): markup dropped, lowercased, every character
    but letters, marks, digits, connectors, spaces and hyphens removed, spaces turned to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link or image: its text
    text = re.sub(r"<[^>]+>", "", text).lower()
    kept = "".join(
        ch for ch in text if ch in " -" or unicodedata.category(ch)[0] in "LMN" or unicodedata.category(ch) == "Pc"
    )
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    lines = _prose(page.read_text())
    for line in lines:
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    found.update(EXPLICIT.findall("\n".join(lines)))
    return found


def links(page: Path) -> list[str]:
    text = "\n".join(_prose(page.read_text()))
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code holds no links
    return [target for target in LINK.findall(text) if target and "://" not in target and ":" not in target]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        file_part, _, anchor = target.partition("#")
        linked = (page.parent / file_part).resolve() if file_part else page
        if not linked.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target} (no heading #{anchor} in {linked.relative_to(ROOT)})")
    assert broken == [], f"{page.relative_to(ROOT)}: {broken}"


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("The HTTP API (tenants)", "the-http-api-tenants"),
        ("Before the first deploy: `fusionfleet aws preflight`", "before-the-first-deploy-fusionfleet-aws-preflight"),
        ("IAM, proven by every call", "iam-proven-by-every-call"),
        ("`output_video_*` and the [encoder](x.md)", "output_video_-and-the-encoder"),
        ("Tests — what runs where", "tests--what-runs-where"),
    ],
)
def test_anchors_are_named_as_github_names_them(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor


def test_a_link_to_a_missing_heading_is_found(tmp_path: Path) -> None:
    # GIVEN a page whose link names a heading the other page does not have (a negative control)
    (tmp_path / "a.md").write_text("# A\n\n## Same\n\n## Same\n\nSee [b](b.md#nowhere) and [here](#same-1).\n")
    (tmp_path / "b.md").write_text("# B\n\n```sh\n# nowhere\n```\n")
    page = tmp_path / "a.md"
    # THEN the repeated heading's second anchor exists, and the heading inside a code block does not
    assert "same-1" in anchors(page)
    assert "nowhere" not in anchors(tmp_path / "b.md")
    assert links(page) == ["b.md#nowhere", "#same-1"]
