"""The `fusionfleet …` command lines of README.md and docs/*.md, read as a reader would type them.

Fenced code blocks (```sh, ```bash, ```console, ```shell and plain ```) are read as shell: a line ending
in `\\` goes on on the next, `# …` is a comment, `|`, `&&`, `||` and `;` end a command, `$( … )` is a
command of its own (`TOKEN=$(fusionfleet local token --tenant acme)`), `NAME=value` before a command is
its environment, and where a block marks its commands with a `$ ` prompt only those lines are commands
(the rest is their output). The usage notation the docs use is understood, not typed: `[--json]` is an
optional part, `[-o FILE | --output-dir DIR]` a choice of parts, `stop|cancel` inside one a choice of
words, a lone `…` the flags left out; placeholders (`<job-id>`, `JOB`, `face.jpg`, `$REGION`) stay as they
are. Inline code in the prose that starts with `fusionfleet ` is read too (`inline_commands`): a fragment
that names a command, perhaps with some of its flags.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import io
import itertools
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+-]*)")
SHELL_FENCES = frozenset({"", "sh", "bash", "console", "shell", "shell-session"})
ELISIONS = frozenset({"…", "..."})
_ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")
_GROUP = re.compile(r"(?<!\S)\[([^\[\]]*)\](?!\S)")
_WORD_CHOICE = re.compile(r"^[\w.-]+(\|[\w.-]+)+$")
PLACEHOLDER = re.compile(r"^(<[^<>]+>|[A-Z][A-Z0-9_]*|\$\{?[A-Za-z_]\w*\}?)$")
_SAMPLES = ("1", "none", "x")
_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
_INLINE = re.compile(r"`(fusionfleet(?: [^`]*)?)`")
_MENTION = re.compile(r"(?:^|[\s|;&(])(?:\S*/)?fusionfleet(?:\s|$)")
_COMMAND_LINE = re.compile(r"^(?:[A-Za-z_]\w*=\S*\s+)*(?:\S*/)?fusionfleet(?:\s|$)")


@dataclass(frozen=True)
class Group:
    """An optional part of a usage line, `[…]`: each of its alternatives a list of words."""

    alternatives: tuple[tuple[str, ...], ...]


Word = str | Group


@dataclass(frozen=True)
class DocCommand:
    page: str  # relative to the checkout
    line: int  # where the command starts
    text: str  # as written, continuation lines joined
    words: tuple[Word, ...]  # after `fusionfleet`
    block: int = 0  # the line its fenced block ends on (0: not in one): the lines shown together

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def plain(self) -> list[str]:
        """The line with every optional part left out."""
        return [word for word in self.words if isinstance(word, str)]

    def variants(self) -> list[list[str]]:
        """The line without its optional parts, then with each alternative of each part (a choice of
        words, `stop|cancel`, once per word). A part that is no flags (`[submit's flags]`) is prose."""
        found = [self.plain()]
        for index, word in enumerate(self.words):
            if not isinstance(word, Group):
                continue
            for alternative in word.alternatives:
                if not alternative or not alternative[0].startswith("-"):
                    continue
                choices = [part.split("|") if _WORD_CHOICE.match(part) else [part] for part in alternative]
                for chosen in itertools.product(*choices):
                    before = [w for w in self.words[:index] if isinstance(w, str)]
                    after = [w for w in self.words[index + 1 :] if isinstance(w, str)]
                    found.append([*before, *chosen, *after])
        return found


def _closing(text: str, start: int) -> int:
    """The index of the `)` that closes the `$(` opened just before `start` (quotes respected)."""
    depth, quote = 1, ""
    for index in range(start, len(text)):
        char = text[index]
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return index
    raise ValueError(f"unclosed $( in {text!r}")


def segments(text: str) -> list[str]:
    """The simple commands of a shell line: split at `|`, `&&`, `||`, `;` outside quotes and usage
    brackets, a `# …` comment dropped; each `$( … )` one of its own (it stands as `$SUBST` in its line)."""
    found: list[str] = []
    current: list[str] = []
    quote, bracket, index = "", 0, 0
    while index < len(text):
        char = text[index]
        at_word_start = index == 0 or text[index - 1].isspace()
        if quote:
            quote = "" if char == quote else quote
        elif text.startswith("$(", index):
            end = _closing(text, index + 2)
            found += segments(text[index + 2 : end])
            current.append("$SUBST")
            index = end + 1
            continue
        elif char in "'\"" and not bracket:  # a usage bracket is prose: `[submit's flags]`
            quote = char
        elif char == "[" and at_word_start:
            bracket += 1
        elif char == "]" and bracket:
            bracket -= 1
        elif char == "#" and at_word_start and not bracket:
            break
        elif char in "|;&" and not bracket:
            found.append("".join(current))
            current = []
            while index + 1 < len(text) and text[index + 1] in "|&":
                index += 1
            index += 1
            continue
        current.append(char)
        index += 1
    if quote:
        raise ValueError(f"unclosed quote in {text!r}")
    found.append("".join(current))
    return [segment.strip() for segment in found if segment.strip()]


def _loose(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:  # prose in a usage bracket: `[submit's flags]`
        return text.split()


def words(segment: str) -> list[Word]:
    """A simple command's words, its usage brackets as Groups (their alternatives split at ` | `)."""
    found: list[Word] = []
    parts = _GROUP.split(segment)
    for index, part in enumerate(parts):
        if index % 2 == 0:
            found += shlex.split(part)
        else:
            found.append(Group(tuple(tuple(_loose(choice)) for choice in re.split(r"\s+\|\s+", part.strip()))))
    return found


def _command(page: str, line: int, segment: str) -> DocCommand | None:
    found = words(segment)
    while found and isinstance(found[0], str) and _ASSIGNMENT.match(found[0]):
        found.pop(0)  # the command's environment
    head = found[0] if found else None
    if not isinstance(head, str) or not (head == "fusionfleet" or head.endswith("/fusionfleet")):
        return None
    return DocCommand(page, line, segment, tuple(found[1:]))


def _blocks(page: Path) -> Iterator[tuple[int, list[tuple[int, str]]]]:
    """Each shell-like fenced block's lines, numbered from 1."""
    block: list[tuple[int, str]] | None = None
    language = ""
    for number, line in enumerate(page.read_text().splitlines(), 1):
        fence = FENCE.match(line)
        if fence and block is None:
            block, language = [], fence.group(2).lower()
        elif fence and block is not None:
            if language in SHELL_FENCES:
                yield number, block
            block = None
        elif block is not None:
            block.append((number, line))


def _logical_lines(block: list[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """Each command line of a block (continuations joined), its prompt taken off; where the block has
    prompts, only the prompted lines."""
    prompted = any(line.lstrip().startswith("$ ") for _n, line in block)
    pending: tuple[int, str] | None = None
    for number, line in block:
        if pending is not None:
            start, text = pending
            text += " " + line.strip()
        elif prompted and not line.lstrip().startswith("$ "):
            continue
        else:
            start, text = number, line.strip().removeprefix("$ ").strip()
        if text.endswith("\\"):
            pending = (start, text[:-1].rstrip())
            continue
        pending = None
        if text and not text.startswith("#"):
            yield start, text
    if pending is not None:
        yield pending


def fenced_commands(pages: list[Path] = PAGES) -> list[DocCommand]:
    """Every `fusionfleet …` command in the pages' shell blocks, in page order. A line that cannot be
    split as shell raises ValueError naming it."""
    found = []
    for page in pages:
        name = _name(page)
        for _end, block in _blocks(page):
            for number, text in _logical_lines(block):
                if not _MENTION.search(text):
                    continue
                try:
                    split = segments(text)
                except ValueError as error:
                    if _COMMAND_LINE.match(text):
                        raise ValueError(f"{name}:{number}: {error}") from error
                    continue  # a diagram or prose that names the CLI, in an untyped block
                for segment in split:
                    command = _command(name, number, segment)
                    if command is not None:
                        found.append(dataclasses.replace(command, block=_end))
    return found


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else page.name


def _prose(page: Path) -> Iterator[tuple[int, str]]:
    fenced = False
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            yield number, line


def inline_commands(pages: list[Path] = PAGES) -> list[DocCommand]:
    """Every `fusionfleet …` span of inline code in the prose: a choice of commands (`submit|status`)
    counted once per command. A span broken over two lines is read where it starts."""
    found = []
    for page in pages:
        name = _name(page)
        lines = list(_prose(page))
        for index, (number, line) in enumerate(lines):
            joined = line + (" " + lines[index + 1][1].strip() if index + 1 < len(lines) else "")
            for match in _INLINE.finditer(joined):
                if match.start() >= len(line):
                    continue
                try:
                    span = words(match.group(1))
                except ValueError:  # an apostrophe in a message
                    span = list(match.group(1).split())
                if len(span) > 1 and isinstance(span[1], str) and span[1].endswith(":"):
                    continue  # a message the CLI prints (`fusionfleet submit: error: …`), not a command
                rest, head = span[2:], span[1] if len(span) > 1 else None
                if head in ELISIONS:
                    continue  # `fusionfleet …`: the CLI at large
                heads = head.split("|") if isinstance(head, str) else [head] if head is not None else []
                for each in heads:
                    given = tuple(rest) if each is None else (each, *rest)
                    found.append(DocCommand(name, number, match.group(1), given))
    return found


def subparser(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """The (sub)parser the leading words of argv name, and those words."""
    path: list[str] = []
    for word in argv:
        commands = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if commands is None or word not in commands.choices:
            break
        parser = commands.choices[word]
        path.append(word)
    return parser, path


def _takes_value(parser: argparse.ArgumentParser, flag: str) -> bool:
    action = parser._option_string_actions.get(flag.split("=", 1)[0])
    return action is not None and action.nargs != 0 and "=" not in flag


def without_elisions(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[list[str], bool]:
    """argv without its lone `…` (the flags left out), and whether it had one; a `…` that is a flag's
    value (`--subnets ...`) stays, a value like any placeholder."""
    sub, _path = subparser(parser, argv)
    kept: list[str] = []
    elided = False
    for word in argv:
        if word in ELISIONS and not (kept and _takes_value(sub, kept[-1])):
            elided = True
            continue
        kept.append(word)
    return kept, elided


def parser_for(argv: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """The parser `fleetctl.cli.main` hands argv to, and what it hands it: `swap` goes to the worker's own
    parser (main execs `python -m gpu_worker swap`), everything else to the CLI's."""
    if argv[:1] == ["swap"]:
        return _swap_parser(), argv[1:]
    return _cli_parser(), argv


@functools.cache
def _cli_parser() -> argparse.ArgumentParser:
    from fleetctl.cli import build_parser

    return build_parser()


@functools.cache
def _swap_parser() -> argparse.ArgumentParser:
    from gpu_worker.standalone import build_parser

    return build_parser()


def _sample(action: argparse.Action) -> str | None:
    """A value the action takes, standing in for a placeholder (`--workers N`)."""
    if action.choices:
        first = next(iter(action.choices))
        return str(getattr(first, "value", first))
    convert = action.type if callable(action.type) else str
    for candidate in _SAMPLES:
        try:
            convert(candidate)
        except (ValueError, TypeError, argparse.ArgumentTypeError):
            continue
        return candidate
    return None


def parse_problem(argv: list[str]) -> str | None:
    """Why `fusionfleet ARGV` would not be taken, or None: the real parser, nothing run. A lone `…` stands for
    flags left out (a missing required argument is then not the line's fault); a placeholder value the
    parser refuses for its type (`--workers N`, `--state S`) is given one it takes, its flag still checked."""
    parser, argv = parser_for(argv)
    argv, elided = without_elisions(parser, argv)
    error = None
    for _attempt in range(len(argv) + 1):
        error = parse_error(parser, argv)
        if error is None or (elided and "the following arguments are required" in error):
            return None
        named = re.search(r"error: argument ([^:]+):", error)
        sub, _path = subparser(parser, argv)
        actions = sub._option_string_actions
        index = next(
            (i for i, word in enumerate(argv[:-1])
             if word in actions and named and "/".join(actions[word].option_strings) == named.group(1)
             and PLACEHOLDER.match(argv[i + 1])),
            None,
        )  # fmt: skip
        sample = None if index is None else _sample(actions[argv[index]])
        if index is None or sample is None:
            return error
        argv = [*argv[: index + 1], sample, *argv[index + 2 :]]
    return error


def flag_problem(argv: list[str]) -> str | None:
    """For a fragment named in prose (`fusionfleet aws teardown --stack NAME`): the command it names exists
    and takes each flag it shows; its values and required arguments are not its business."""
    parser, argv = parser_for(argv)
    sub, path = subparser(parser, argv)
    rest = argv[len(path) :]
    commands = next((a for a in sub._actions if isinstance(a, argparse._SubParsersAction)), None)
    if commands is not None and rest and not rest[0].startswith("-"):
        return f"no command {' '.join([*path, rest[0]])!r} (it has {', '.join(commands.choices)})"
    for word in rest:
        flag = word.split("=", 1)[0]
        if word.startswith("-") and not _NUMBER.match(word) and flag not in sub._option_string_actions:
            return f"{' '.join(path) or 'fusionfleet'} takes no flag {word}"
    return None


def parse_error(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """What the parser says against argv (its usage error), or None where it takes it; nothing runs."""
    said = io.StringIO()
    with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
        try:
            parser.parse_args(argv)
        except SystemExit as exit:
            if exit.code not in (0, None):
                return said.getvalue().strip().splitlines()[-1] if said.getvalue().strip() else f"exit {exit.code}"
    return None


def command_path(argv: list[str]) -> tuple[str, ...]:
    """The command a line runs (`("tenant", "set")`), as the parser reads its leading words."""
    if argv[:1] == ["swap"]:
        return ("swap",)
    return tuple(subparser(_cli_parser(), argv)[1])


# Beyond being parsed (tests/static/test_doc_commands.py), where each command the docs' blocks show runs.
# Without a stack or AWS: tests/integration/test_doc_commands_run.py runs every such line of the docs.
RUN_WITHOUT_STACK = frozenset({("swap",), ("estimate",)})
# On the e2e tests' local stack: tests/e2e/test_doc_commands.py runs README's lines (usage.md repeats them),
# generated media and the job's id in place of the placeholders.
RUN_ON_STACK = frozenset({
    ("submit",), ("try",), ("wait",), ("download",), ("status",), ("list",), ("cancel",), ("retry",), ("logs",),
    ("workers",), ("local", "status"), ("local", "token"), ("local", "webhook-secret"), ("tenant", "set"),
    ("tenant", "show"),
})  # fmt: skip
# Parsed only, and why.
NOT_RUN = {
    ("local", "up"): "the e2e fixture runs it with the tests' own flags (tests/e2e/conftest.py); the docs' "
    "lines would start a second stack on LocalStack's default port",
    ("local", "down"): "the e2e fixture's teardown runs it; here it would stop the stack the other tests share",
    ("subscribe",): "an e-mail subscription; tests/e2e/test_tenants.py subscribes a queue through the CLI",
    ("aws", "preflight"): "needs an AWS account; tests/integration/test_preflight.py runs it on moto",
    ("aws", "teardown"): "needs an AWS account; tests/integration/test_preflight.py runs it on moto",
}
