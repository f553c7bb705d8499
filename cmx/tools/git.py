"""Check out a git repository at a pinned commit (gitpython), atomically, into a folder."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from cmx.errors import CmxError
from cmx.tools.fs import temp_dir_beside

# the registry imports this module on every command (is_commit_sha): difflib, logging, secrets
# and shutil are imported in the functions that need them, gitpython only when fetching

if TYPE_CHECKING:  # annotations only: gitpython is imported when a fetch needs it
    from types import ModuleType

    from git import RemoteProgress, Repo

_SHA = re.compile(r"^[0-9a-f]{40}$")
_SHORT_SHA = re.compile(r"^[0-9a-fA-F]{4,39}$")
# stderr of a fetch that could not reach the repository at all: fetching every branch instead
# would fail the same way, only slower
_UNREACHABLE = ("could not read from remote repository", "does not appear to be a git repository",
                "unable to access", "could not resolve host", "repository not found", "connection refused",
                "connection timed out")
# never wait for a password on a terminal that no one watches (cmx runs steps unattended)
_ENV = {"GIT_TERMINAL_PROMPT": "0"}

ProgressFn = Callable[[int, "int | None"], None]
"""`on_progress(done, total)`: objects received so far, and how many there are (None: unknown)."""


class GitError(CmxError):
    """A repository could not be fetched or a commit was not found."""


def is_commit_sha(rev: str) -> bool:
    return bool(_SHA.match(rev))


def checkout_commit(url: str, rev: str, dest: Path, *, submodules: bool = False,
                    on_progress: ProgressFn | None = None) -> Path:
    """Make `dest` a checkout of `url` at commit `rev`; reuse it when it is already there.

    `rev` must be a full 40-hex commit sha: a branch or tag moves, and an abbreviated sha can
    become ambiguous. With `submodules`, the submodules are checked out too, at the commits
    `rev` records for them (so they are pinned as well). The clone happens in a temporary
    folder beside `dest` and is renamed into place, so a failed or interrupted fetch never
    leaves a half checkout that looks complete. An existing `dest` is trusted to be a checkout
    this function made with the same options; one at another commit is an error.
    """
    require_commit_sha(url, rev)
    if (dest / ".git").is_dir():
        _check_head(dest, rev)
        return dest
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise GitError(f"cannot check out {url} into {dest}: it exists and is not a checkout",
                       hint="remove it, or check out into another folder")
    git = _import_git()
    try:
        tmp = temp_dir_beside(dest)
    except OSError as exc:
        raise GitError(f"cannot check out {url} into {dest}: {exc.strerror or exc}") from None
    try:
        repo = git.Repo.init(tmp)
        try:
            with repo.git.custom_environment(**_ENV):
                _fetch(git, repo, absolute_if_local(url), url, rev, on_progress)
                _checkout(git, repo, url, rev)
                if submodules:
                    _update_submodules(git, repo, url, rev)
        finally:
            repo.close()
        try:
            os.rename(tmp, dest)
        except OSError as exc:
            if not (dest / ".git").is_dir():  # else another process published it first: use that
                raise GitError(f"cannot check out {url} into {dest}: {exc.strerror or exc}") from None
    finally:
        if tmp.exists():
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def require_commit_sha(url: str, rev: str) -> None:
    """Refuse anything but a full lowercase commit sha, saying why and what to pin instead."""
    if is_commit_sha(rev):
        return
    if _SHA.match(rev.lower()):
        raise GitError(f"{rev!r} is not a commit sha as git writes it (40 lowercase hex digits)",
                       hint=f"write it in lowercase: {rev.lower()}")
    if _SHORT_SHA.match(rev):
        raise GitError(f"{rev!r} is an abbreviated sha: a pinned checkout needs the full 40-hex sha",
                       hint="an abbreviated sha can become ambiguous as the repository grows, and servers only "
                            f"fetch full ones; run `git rev-parse {rev}` in a clone for the full sha")
    raise GitError(f"{rev!r} is not a commit: a pinned checkout needs the full 40-hex sha",
                   hint=f"a branch or tag moves, so the same {rev!r} would give other files tomorrow; "
                        + _pin_advice(url, rev))


def resolve_ref(url: str, ref: str, *, timeout: float = 60) -> str:
    """The commit sha that branch or tag `ref` names at `url` now (`git ls-remote`), to pin it.

    `ref` may be a short name (`main`, `v1.2`), a full ref (`refs/heads/main`) or `HEAD`. An
    annotated tag gives the commit it points to. A name that is both a branch and a tag at
    different commits is an error. A full sha is returned as it is (ls-remote cannot check it).
    """
    if is_commit_sha(ref):
        return ref
    refs = _ls_remote(url, timeout)
    found = {refs[name] for name in _candidates(ref, refs)}
    if len(found) == 1:
        return found.pop()
    if len(found) > 1:
        raise GitError(f"{ref!r} is both a branch and a tag at {url}, on different commits",
                       hint=f"say which: refs/heads/{ref} or refs/tags/{ref}")
    hint = None
    if _SHORT_SHA.match(ref):
        hint = f"ls-remote lists branches and tags, not commits; run `git rev-parse {ref}` in a clone"
    else:
        names = sorted({_short_name(n) for n in refs})
        import difflib

        close = difflib.get_close_matches(ref, names, n=3)
        if close:
            hint = f"did you mean {' or '.join(map(repr, close))}?"
    raise GitError(f"{url} has no branch or tag {ref!r}", hint=hint)


def inside(checkout: Path, subdir: str | None, *, what: str = "the checkout") -> Path:
    """`checkout/subdir`, refused when `subdir` is absolute, climbs out (`..`, a symlink) or is
    missing: a recipe's output must stay inside its own checkout. `what` names the checkout in
    errors (`URL at SHA`: its folder may be a temporary one)."""
    if not subdir:
        return checkout
    from cmx.tools.fs import link_out, resolves_inside

    path = checkout / subdir
    if Path(subdir).is_absolute() or ".." in Path(subdir).parts or not resolves_inside(path, checkout):
        found = link_out(checkout, subdir) if not Path(subdir).is_absolute() else None
        link = f" ({found.link.relative_to(checkout)} is a symbolic link to {found.target!r})" if found else ""
        raise GitError(f"subdir {subdir!r} is not inside {what}{link}",
                       hint="give a relative path inside the repository, without '..', and commit folders, not "
                            "links out of it")
    if not path.exists():
        raise GitError(f"subdir {subdir!r} does not exist in {what}",
                       hint="list the folders at that commit: `git ls-tree -d --name-only SHA` in a clone")
    return path


# --- the steps of a checkout --------------------------------------------------------------------

def _fetch(git: ModuleType, repo: Repo, url: str, shown_url: str, rev: str,
           on_progress: ProgressFn | None) -> None:
    remote = repo.create_remote("origin", url)
    progress = _progress(git, on_progress)
    try:
        remote.fetch(rev, depth=1, progress=progress)
        return
    except git.GitCommandError as exc:
        if _unreachable(exc):
            raise GitError(f"cannot fetch {shown_url}: {_reason(exc)}",
                           hint="check the URL and that this machine can reach it") from None
    try:  # servers that refuse fetching a sha directly: fetch every branch and tag, then look
        remote.fetch(["+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"], progress=progress)
    except git.GitCommandError as exc:
        raise GitError(f"cannot fetch {shown_url}: {_reason(exc)}",
                       hint="check the URL and that this machine can reach it") from None


def _checkout(git: ModuleType, repo: Repo, url: str, rev: str) -> None:
    try:
        repo.git.checkout("--detach", rev)
    except git.GitCommandError:
        raise GitError(f"commit {rev} was not found in {url}",
                       hint="check the sha (`git ls-remote URL`, or `git log` in a clone)") from None
    head = repo.head.commit.hexsha
    if head != rev:  # checkout peels an annotated tag's own sha to its commit: still not a commit
        raise GitError(f"{rev} is not a commit in {url} but a {repo.git.cat_file('-t', rev)} object",
                       hint=f"pin the commit it points to: {head}")


def _update_submodules(git: ModuleType, repo: Repo, url: str, rev: str) -> None:
    try:
        repo.git.submodule("update", "--init", "--recursive")
    except git.GitCommandError as exc:
        raise GitError(f"cannot check out the submodules of {url} at {rev}: {_reason(exc)}",
                       hint="check that their URLs (in .gitmodules) can be reached from here; git refuses "
                            "submodules at local paths unless protocol.file.allow=always") from None


def _check_head(dest: Path, rev: str) -> None:
    """Read .git/HEAD directly (no gitpython import on this, the common, path)."""
    try:
        head = (dest / ".git" / "HEAD").read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        head = ""
    if head != rev:
        raise GitError(f"{dest} already holds a checkout, not of {rev} (HEAD: {head or 'unreadable'})",
                       hint="remove that folder, or check out into another one")


# --- helpers --------------------------------------------------------------------------------------

def _import_git() -> ModuleType:
    """gitpython, imported only when a fetch is needed (it is slow to import, and raises
    ImportError when there is no git program at all)."""
    try:
        import git
    except ImportError as exc:
        raise GitError(f"cannot use git: {str(exc).splitlines()[0]}",
                       hint="install git (`apt-get install git`) or put it on PATH") from None
    # gitpython logs git's stderr as warnings ("Error lines received while fetching"); with no
    # handler anywhere, Python would print them on cmx's stderr. The GitError says it once.
    import logging

    logger = logging.getLogger("git")
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):  # once, not per fetch
        logger.addHandler(logging.NullHandler())
    return git


def absolute_if_local(url: str) -> str:
    """A relative local path made absolute: git runs inside the temporary folder, where the
    path would mean something else. URLs and scp-like `host:path` are left alone."""
    if "://" in url or re.match(r"^[^/]+:", url):
        return url
    return os.path.abspath(os.path.expanduser(url))


def _progress(git: ModuleType, on_progress: ProgressFn | None) -> RemoteProgress | None:
    if on_progress is None:
        return None

    report = on_progress  # mypy keeps the narrowing to ProgressFn for a local, not into a class body

    class _Receiving(git.RemoteProgress):  # type: ignore[name-defined, misc]  # a base off a module object: not static
        def update(self, op_code: int, cur_count: str | float, max_count: str | float | None = None,
                   message: str = "") -> None:
            if op_code & self.RECEIVING:
                report(int(cur_count or 0), int(max_count) if max_count else None)

    return _Receiving()


def _ls_remote(url: str, timeout: float) -> dict[str, str]:
    git = _import_git()
    runner = git.cmd.Git()
    try:
        with runner.custom_environment(**_ENV):
            out = runner.ls_remote(absolute_if_local(url), kill_after_timeout=timeout)
    except git.GitCommandError as exc:
        raise GitError(f"cannot list the branches and tags of {url}: {_reason(exc)}",
                       hint="check the URL and that this machine can reach it") from None
    refs: dict[str, str] = {}
    for line in out.splitlines():
        sha, _, name = line.partition("\t")
        if is_commit_sha(sha) and name:
            refs[name] = sha
    return refs


def _candidates(ref: str, refs: dict[str, str]) -> list[str]:
    """The refs a name means, as git reads it: exactly, or as a tag (its commit when annotated),
    or as a branch."""
    if ref in refs and (ref == "HEAD" or ref.startswith("refs/")):
        names = [ref]
        peeled = f"{ref}^{{}}"
        return [peeled] if peeled in refs else names
    out = []
    for name in (f"refs/tags/{ref}", f"refs/heads/{ref}"):
        if f"{name}^{{}}" in refs:
            out.append(f"{name}^{{}}")
        elif name in refs:
            out.append(name)
    return out


def _short_name(ref: str) -> str:
    ref = ref.removesuffix("^{}")
    for prefix in ("refs/heads/", "refs/tags/"):
        if ref.startswith(prefix):
            return ref[len(prefix):]
    return ref


def _pin_advice(url: str, rev: str) -> str:
    """'main' is <sha> at URL now: pin that — or, when the remote cannot say, how to find out."""
    try:
        sha = resolve_ref(url, rev, timeout=20)
    except CmxError:
        return f"run `git ls-remote {url}` and pin the sha of the commit you want"
    return f"{rev!r} is {sha} at {url} now: pin that sha"


def _unreachable(exc: Exception) -> bool:
    text = str(getattr(exc, "stderr", "") or exc).lower()
    return any(marker in text for marker in _UNREACHABLE)


def _reason(exc: Exception) -> str:
    """git's own explanation: its first `fatal:` or `error:` line, else its last line."""
    text = str(getattr(exc, "stderr", "") or exc).strip()
    text = text.removeprefix("stderr:").strip()  # gitpython's wrapping: stderr: '...'
    lines = [ln.strip().strip("'\"").strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln]
    for line in lines:
        for prefix in ("fatal: ", "error: "):
            if line.startswith(prefix):
                return line[len(prefix):]
    return lines[-1] if lines else "git failed"
