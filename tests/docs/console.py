"""Run a page's console examples (`$ cmx …` blocks) top to bottom and compare their output with the page.

A console example is a fenced code block with no info string (or `console`), or a 4-space indented block,
whose first line starts with `$ `. Each `$ ` line is a command (a trailing backslash continues it); the lines
up to the next `$ ` line are what it prints, stdout and stderr together. An HTML comment on the line before a
block steers it:

- `<!-- console: skip REASON -->`: the block is not run (a GPU, the real model); REASON is required.
- `<!-- console: file PATH -->` before any code block: its text is written to PATH before the next command
  (the page's paths in it pointed at the session's, as in commands).
- `<!-- console: sh -->` before a block of plain shell lines: they run, unchecked; `export` and `cd` persist.
  The comment may carry the lines itself (`<!-- console: sh` … `-->`): set-up the prose describes.
- `<!-- console: setup NAME -->`: the test module's named set-up (a server, a fake tool) runs there.
- `<!-- console: measured -->`: the next block's decimal figures (tokens/s, ROUGE) are measurements, which
  differ from run to run: any decimal number matches them. Its other text is compared as usual.

Several directives may stand one after another; `skip`, `file` and a bare `sh` apply to the next block, a
`setup` and an `sh` that carries its lines run where they stand.

A page runs as one session in a fresh folder: the page's `/tmp/` is that folder, its `/work/main` (the
checkout it was written in, and its current folder) a copy of the checkout's recipes and registry there, so
a command never writes into the real checkout or another page's files. Output is compared modulo what
differs between two honest runs: paths (mapped back to the page's), content keys, times and durations, and
column padding. On the page, a line `...` stands for any lines and `...` inside a line for any text. A key
the page shows is learned: a later command that names it (`cmx cache show 08ba`) gets the key this run made.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

PAGE_CHECKOUT = "/work/main"                     # the checkout the pages were written in
PAGE_TMP = "/tmp"
DIRECTIVE = re.compile(r"<!--\s*console:\s*(\w+)\s*(.*?)\s*-->", re.S)
FENCE = re.compile(r"^( *)(`{3,}|~{3,})\s*([\w-]*)\s*$")     # a fence, indented too (in a list item)
STATE_MARK = "__cmx_console_state__"


@dataclass(frozen=True)
class Example:
    """One `$ ` command of a page and the output the page shows for it."""
    line: int                                    # 1-based line of the `$ ` on the page
    command: str
    expected: str


@dataclass(frozen=True)
class Block:
    """A code block of a page."""
    line: int                                    # 1-based line of the block's first text line
    text: str
    info: str                                    # a fence's info string ("" for an indented block)

    @property
    def is_console(self) -> bool:
        return self.info in ("", "console") and self.text.startswith("$ ")

    def examples(self) -> list[Example]:
        """The block's commands with their expected output, continuation lines joined."""
        examples: list[Example] = []
        lines = self.text.split("\n")
        i = 0
        while i < len(lines):
            start = i
            command = lines[i][2:]
            while command.endswith("\\") and i + 1 < len(lines):
                i += 1
                command = command[:-1].rstrip() + " " + lines[i].strip()
            i += 1
            output: list[str] = []
            while i < len(lines) and not lines[i].startswith("$ "):
                output.append(lines[i])
                i += 1
            examples.append(Example(self.line + start, command.strip(), "\n".join(output)))
        return examples


@dataclass(frozen=True)
class Directive:
    """A `<!-- console: NAME ARGUMENT -->` comment of a page."""
    line: int
    name: str                                    # skip, file, sh, setup or measured
    argument: str


def items(text: str) -> list[Block | Directive]:
    """The page's code blocks (fenced, or indented by four spaces) and console directives, in page order."""
    lines = text.split("\n")
    found: list[Block | Directive] = []
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence:
            indent, marker = fence.group(1), fence.group(2)
            end = i + 1
            while end < len(lines) and not lines[end].lstrip(" ").startswith(marker):
                end += 1
            body = [line[len(indent):] if line.startswith(indent) else line.lstrip(" ") for line in lines[i + 1:end]]
            found.append(Block(i + 2, "\n".join(body), fence.group(3)))
            i = end + 1
        elif lines[i].startswith("    ") and lines[i].strip() and (i == 0 or not lines[i - 1].strip()):
            end = i
            while end < len(lines) and (lines[end].startswith("    ") or not lines[end].strip()):
                end += 1
            body = [line[4:] for line in lines[i:end]]
            while body and not body[-1].strip():
                body.pop()
            found.append(Block(i + 1, "\n".join(body), ""))
            i = end
        elif lines[i].lstrip(" ").startswith("<!--") and "console:" in lines[i]:
            end = i
            while end < len(lines) - 1 and "-->" not in lines[end]:
                end += 1
            match = DIRECTIVE.fullmatch("\n".join(lines[i:end + 1]).strip())
            if match is None:
                raise ValueError(f"line {i + 1}: a console directive reads `<!-- console: NAME ARGUMENT -->`")
            found.append(Directive(i + 1, match.group(1), match.group(2)))
            i = end + 1
        else:
            i += 1
    return found


def blocks(text: str) -> list[Block]:
    """The page's code blocks, in order."""
    return [item for item in items(text) if isinstance(item, Block)]


# --- comparing ---------------------------------------------------------------------------------------------

# what two honest runs print differently, each as a regex the page's text turns into
_VOLATILE = [
    # a run folder, STAMP-NAME, or STAMP-NAME-2 for the second run of NAME in the same second
    ("run", r"\d{8}-\d{6}-[A-Za-z][\w.-]*?(?:-\d+)?(?=[/\"\s]|$)", ""),
    ("time", r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:[+-]\d{2}:\d{2}|Z)?",
     r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:[+-]\d{2}:\d{2}|Z)?"),
    ("duration", r"\b\d+(?:\.\d+)? ?(?:s|ms|µs)\b", r"\d+(?:\.\d+)? ?(?:s|ms|µs)"),
    ("seconds", r'"seconds": \d+(?:\.\d+)?', r'"seconds": \d+(?:\.\d+)?'),
    ("key", r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,}\b", r"([0-9a-f]{7,})"),
]
_TOKENS = re.compile("|".join(f"(?P<{name}>{page})" for name, page, _ in _VOLATILE) + r"|(?P<ellipsis>\.\.\.)")
_MEASURED = re.compile(_TOKENS.pattern + r"|(?P<figure>(?<![\w.])\d+\.\d+(?![\w.]))")


def _squeezed(text: str) -> str:
    """Text with trailing spaces, trailing blank lines and column padding (two spaces or more) made even."""
    lines = [re.sub(r"(?<=\S) {2,}", "  ", line.rstrip()) for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def _pattern(expected: str, measured: bool = False) -> tuple[re.Pattern[str], list[str]]:
    """A regex for what the page shows (volatile parts loosened, `...` a wildcard, and with MEASURED any
    decimal figure) and the page's keys in the order of the regex's groups."""
    parts: list[str] = []
    keys: list[str] = []
    if not _squeezed(expected):
        return re.compile(""), keys                  # the command prints nothing
    for line in _squeezed(expected).split("\n"):
        if line.strip() in ("...", "| ..."):
            parts.append(r"(?:[^\n]*\n)*?")
            continue
        piece, at = [], 0
        for token in (_MEASURED if measured else _TOKENS).finditer(line):
            piece.append(re.escape(line[at:token.start()]))
            kind = token.lastgroup or ""
            if kind == "ellipsis":
                piece.append(r"[^\n]*?")
            elif kind == "figure":
                piece.append(r"\d+(?:\.\d+)?")
            elif kind == "run":
                name = re.sub(r"-\d+$", "", token.group()[16:])
                piece.append(r"\d{8}-\d{6}-" + re.escape(name) + r"(?:-\d+)?")
            else:
                piece.append(dict((n, r) for n, _, r in _VOLATILE)[kind])
                if kind == "key":
                    keys.append(token.group())
            at = token.end()
        piece.append(re.escape(line[at:]))
        parts.append("".join(piece) + r"\n")
    return re.compile("".join(parts)), keys


@dataclass(frozen=True)
class Outcome:
    matched: bool
    keys: dict[str, str]                         # the page's key -> this run's key, where it matched


def compare(expected: str, actual: str, measured: bool = False) -> Outcome:
    """Whether the output matches the page's, and the keys it made in place of the page's."""
    pattern, page_keys = _pattern(expected, measured)
    match = pattern.fullmatch(_squeezed(actual) + "\n" if actual.strip() else "")
    if match is None:
        return Outcome(False, {})
    return Outcome(True, {page: ours for page, ours in zip(page_keys, match.groups(), strict=True) if page != ours})


# --- running -----------------------------------------------------------------------------------------------

@dataclass
class Mismatch:
    page: str
    line: int
    command: str
    expected: str
    actual: str

    def __str__(self) -> str:
        diff = difflib.unified_diff(_squeezed(self.expected).split("\n"), _squeezed(self.actual).split("\n"),
                                    "the page", "this run", lineterm="", n=2)
        return f"{self.page}:{self.line}: $ {self.command}\n" + "\n".join(diff)


@dataclass
class Session:
    """One page's shell session: its folder, environment, current folder, exit status and learned keys."""
    repo: Path
    root: Path                                   # stands for the page's /tmp
    checkout: Path                               # stands for the page's /work/main
    env: dict[str, str]
    cwd: Path
    status: int = 0
    keys: dict[str, str] = field(default_factory=dict)
    timeout: float = 180.0
    cleanups: list[Callable[[], None]] = field(default_factory=list)   # a set-up's server to stop, last first

    @classmethod
    def fresh(cls, repo: Path, root: Path) -> Session:
        """A session in ROOT: a checkout copy with the recipes, the registry and docs/examples, cmx on PATH,
        CMX_HOME that copy and no other CMX_* set."""
        checkout = root / "work-main"
        shutil.copytree(repo / "recipes", checkout / "recipes", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy2(repo / "registry.yaml", checkout / "registry.yaml")
        shutil.copytree(repo / "docs" / "examples", checkout / "docs" / "examples")    # the files pages pass
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CMX_", "PYTEST_", "HF_"))}
        env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", PYTHONUNBUFFERED="1",
                   CMX_HOME=str(checkout))
        return cls(repo, root, checkout, env, checkout)

    def local(self, text: str) -> str:
        """A command or path of the page, pointed at this session's folders and the page's keys at ours."""
        ours = {f"{PAGE_CHECKOUT}/.venv": str(Path(sys.executable).parent.parent), PAGE_CHECKOUT: str(self.checkout),
                f"{PAGE_TMP}/": f"{self.root}/"}
        text = re.sub(rf"{re.escape(PAGE_CHECKOUT)}/\.venv|{re.escape(PAGE_CHECKOUT)}|(?<![\w/.]){PAGE_TMP}/",
                      lambda m: ours[m.group()], text)    # in one pass: the session's folders are under /tmp too
        return re.sub(r"\b[0-9a-f]{4,}", self._our_key, text)

    def _our_key(self, match: re.Match[str]) -> str:
        """A prefix of a key the page showed, as the same prefix of the key this run made in its place."""
        prefix = match.group()
        ours = [our for page, our in self.keys.items() if page.startswith(prefix)]
        return ours[0][:len(prefix)] if ours else prefix

    def as_page(self, text: str) -> str:
        """Output of this session with its paths written as the page writes them."""
        for ours, page in ((str(self.checkout), PAGE_CHECKOUT), (str(self.repo), PAGE_CHECKOUT),
                           (str(self.root), PAGE_TMP)):
            text = text.replace(ours, page)
        return text

    def shell(self, script: str) -> str:
        """Run SCRIPT in bash with the session's state ($? of the last command included); keep its exports
        and its current folder. A script past the timeout is killed with every process it started."""
        wrapped = f"(exit {self.status})\n{script}\n__rc=$?\necho {STATE_MARK}; echo $__rc; pwd; env -0"
        with subprocess.Popen(["bash", "-c", wrapped], cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True) as proc:
            try:
                out, _ = proc.communicate(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                raise
        text = out.decode("utf-8", "replace")
        output, mark, state = text.rpartition(f"{STATE_MARK}\n")
        if not mark:
            raise RuntimeError(f"the shell ended before its state was read ({proc.returncode}):\n{text}")
        rc, cwd, environ = state.split("\n", 2)
        self.status, self.cwd = int(rc), Path(cwd)
        self.env = dict(item.split("=", 1) for item in environ.split("\0") if "=" in item)
        return output

    def write(self, path: str, text: str) -> None:
        target = Path(self.local(path))
        target = target if target.is_absolute() else self.cwd / target
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(self.local(text) + "\n", encoding="utf-8")


Setup = Callable[[Session], None]


@dataclass
class PageRun:
    """What running a page gave: its mismatches, and how many examples ran and were skipped."""
    mismatches: list[Mismatch] = field(default_factory=list)
    ran: int = 0
    skipped: list[str] = field(default_factory=list)


def run_page(page: Path, name: str, session: Session, setups: Mapping[str, Setup]) -> PageRun:
    """Run the page's blocks in order in SESSION; every console example is compared with the page. What the
    set-ups started is stopped at the end."""
    try:
        return _run_blocks(page, name, session, setups)
    finally:
        while session.cleanups:
            session.cleanups.pop()()


def _run_blocks(page: Path, name: str, session: Session, setups: Mapping[str, Setup]) -> PageRun:
    result = PageRun()
    ahead: dict[str, Directive] = {}              # those that apply to the next block: file, skip, sh, measured
    for item in items(page.read_text(encoding="utf-8")):
        where = f"{name}:{item.line}"
        if isinstance(item, Directive):
            if item.name == "setup":
                if item.argument not in setups:
                    raise KeyError(f"{where}: no set-up named {item.argument!r} (known: {', '.join(setups)})")
                setups[item.argument](session)
            elif item.name == "sh" and item.argument:
                session.shell(session.local(item.argument))
            elif item.name in ("file", "skip", "sh", "measured"):
                if item.name == "skip" and not item.argument:
                    raise ValueError(f"{where}: `console: skip` needs a reason")
                ahead[item.name] = item
            else:
                raise ValueError(f"{where}: unknown console directive {item.name!r}")
            continue
        directives, ahead = ahead, {}
        if "file" in directives:
            session.write(directives["file"].argument, item.text)
        elif "sh" in directives:
            session.shell(session.local(item.text))
        elif "skip" in directives:
            if item.is_console:
                result.skipped.append(f"{where}: {directives['skip'].argument}")
        elif item.is_console:
            for example in item.examples():
                result.ran += 1
                actual = session.as_page(session.shell(session.local(example.command)))
                outcome = compare(example.expected, actual, measured="measured" in directives)
                session.keys.update(outcome.keys)
                if not outcome.matched:
                    result.mismatches.append(Mismatch(name, example.line, example.command, example.expected, actual))
    return result


def console_pages(repo: Path) -> Iterator[Path]:
    """The README and every page under docs/ that holds a console example."""
    for page in [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))]:
        if any(block.is_console for block in blocks(page.read_text(encoding="utf-8"))):
            yield page
