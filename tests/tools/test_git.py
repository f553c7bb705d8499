"""cmx/tools/git.py and recipes/get-git-repo: pinned, atomic checkouts of real repositories."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cmx.tools.git import (
    GitError,
    checkout_commit,
    inside,
    require_commit_sha,
    resolve_ref,
)
from tests.conftest import CMX, REPO, Home, interruptible

GIT = ["git", "-c", "user.name=cmx test", "-c", "user.email=test@example.invalid", "-c", "commit.gpgsign=false",
       "-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always"]
MISSING = "0123456789abcdef0123456789abcdef01234567"


def git(repo: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def commit(repo: Path, files: dict[str, str], message: str = "change") -> str:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def make_repo(root: Path, files: dict[str, str]) -> tuple[Path, str]:
    root.mkdir(parents=True)
    git(root, "init", "-q")
    return root, commit(root, files, "first")


@pytest.fixture
def two_commits(tmp_path: Path) -> tuple[Path, str, str]:
    """A repository whose main branch moved on: (path, first commit, head commit)."""
    repo, first = make_repo(tmp_path / "repo", {"version.txt": "one\n", "src/a.py": "A = 1\n"})
    head = commit(repo, {"version.txt": "two\n", "src/b.py": "B = 2\n"}, "second")
    return repo, first, head


@pytest.fixture
def dest(tmp_path: Path) -> Path:
    """Where checkouts go; its parent holds nothing else, to see leftovers."""
    (tmp_path / "out").mkdir()
    return tmp_path / "out" / "checkout"


def left_behind(dest: Path) -> list[str]:
    return sorted(p.name for p in dest.parent.iterdir())


def allow_local_submodules(monkeypatch: pytest.MonkeyPatch) -> None:
    """git refuses submodules at local paths by default (CVE-2022-39253); these tests use them."""
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "protocol.file.allow")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "always")


# --- checkout_commit --------------------------------------------------------------------------------

def test_checkout_at_a_commit_gives_that_commits_files_not_the_branch_head(two_commits, dest: Path) -> None:
    repo, first, _ = two_commits
    assert checkout_commit(str(repo), first, dest) == dest
    assert (dest / "version.txt").read_text() == "one\n"
    assert (dest / "src" / "a.py").exists() and not (dest / "src" / "b.py").exists()
    assert git(dest, "rev-parse", "HEAD") == first
    assert left_behind(dest) == ["checkout"]


def test_a_file_url_and_a_relative_path_both_work(two_commits, tmp_path: Path, monkeypatch) -> None:
    repo, first, head = two_commits
    checkout_commit(repo.as_uri(), head, tmp_path / "by-url")
    assert (tmp_path / "by-url" / "version.txt").read_text() == "two\n"
    monkeypatch.chdir(tmp_path)  # git runs in a temporary folder: the relative path must not move with it
    checkout_commit("repo", first, tmp_path / "by-relative-path")
    assert (tmp_path / "by-relative-path" / "version.txt").read_text() == "one\n"


def test_a_server_that_refuses_fetching_a_sha_still_gives_the_commit(two_commits, dest: Path, monkeypatch) -> None:
    repo, first, _ = two_commits
    # protocol v0 and no allow*SHA1InWant: the server only hands out what it advertises (branch tips)
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "protocol.version")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "0")
    checkout_commit(str(repo), first, dest)
    assert (dest / "version.txt").read_text() == "one\n"


@pytest.mark.parametrize("rev, message, hint", [
    ("main", "'main' is not a commit: a pinned checkout needs the full 40-hex sha", "a branch or tag moves"),
    ("v1.0", "'v1.0' is not a commit", "a branch or tag moves"),
    ("0123abc", "'0123abc' is an abbreviated sha", "can become ambiguous"),
    (MISSING.upper(), "not a commit sha as git writes it", f"write it in lowercase: {MISSING}"),
])
def test_a_rev_that_is_not_a_full_sha_is_refused_with_the_reason(two_commits, dest: Path, rev: str, message: str,
                                                                 hint: str) -> None:
    repo, _, _ = two_commits
    git(repo, "tag", "v1.0")
    with pytest.raises(GitError) as caught:
        checkout_commit(str(repo), rev, dest)
    assert message in caught.value.message and hint in (caught.value.hint or "")
    assert left_behind(dest) == []


def test_refusing_a_branch_says_which_sha_to_pin(two_commits, dest: Path) -> None:
    repo, _, head = two_commits
    with pytest.raises(GitError) as caught:
        checkout_commit(str(repo), "main", dest)
    assert f"'main' is {head} at {repo} now: pin that sha" in (caught.value.hint or "")


def test_a_sha_that_does_not_exist_is_a_clear_error_and_leaves_no_checkout(two_commits, dest: Path) -> None:
    repo, _, _ = two_commits
    with pytest.raises(GitError) as caught:
        checkout_commit(str(repo), MISSING, dest)
    assert caught.value.message == f"commit {MISSING} was not found in {repo}"
    assert left_behind(dest) == []


def test_an_unreachable_repository_is_a_clear_error_and_leaves_no_checkout(tmp_path: Path, dest: Path) -> None:
    with pytest.raises(GitError) as caught:
        checkout_commit(str(tmp_path / "no-such-repo"), MISSING, dest)
    assert caught.value.message.startswith(f"cannot fetch {tmp_path / 'no-such-repo'}: ")
    assert "does not appear to be a git repository" in caught.value.message
    assert left_behind(dest) == []


def test_the_sha_of_an_annotated_tag_is_refused_with_its_commit(two_commits, dest: Path) -> None:
    repo, first, _ = two_commits
    git(repo, "tag", "-a", "v1", "-m", "release", first)
    tag_object = git(repo, "rev-parse", "v1")
    assert tag_object != first
    with pytest.raises(GitError) as caught:
        checkout_commit(str(repo), tag_object, dest)
    assert "is not a commit" in caught.value.message and "tag object" in caught.value.message
    assert caught.value.hint == f"pin the commit it points to: {first}"
    assert left_behind(dest) == []


def test_checking_out_again_is_a_no_op_that_needs_no_network(two_commits, dest: Path) -> None:
    repo, first, _ = two_commits
    checkout_commit(str(repo), first, dest)
    (dest / "untracked").write_text("kept")
    shutil.rmtree(repo)  # the source is gone: a second call must not need it
    assert checkout_commit(str(repo), first, dest) == dest
    assert (dest / "untracked").read_text() == "kept"


def test_an_existing_checkout_of_another_commit_is_an_error(two_commits, dest: Path) -> None:
    repo, first, head = two_commits
    checkout_commit(str(repo), first, dest)
    with pytest.raises(GitError, match=f"already holds a checkout, not of {head}"):
        checkout_commit(str(repo), head, dest)


def test_a_destination_that_holds_something_else_is_never_checked_out_into(two_commits, dest: Path) -> None:
    repo, first, _ = two_commits
    dest.mkdir()
    (dest / "mine.txt").write_text("keep")
    with pytest.raises(GitError, match="it exists and is not a checkout"):
        checkout_commit(str(repo), first, dest)
    assert os.listdir(dest) == ["mine.txt"] and left_behind(dest) == ["checkout"]


def test_progress_reports_objects_received(tmp_path: Path, dest: Path) -> None:
    # 100 objects or more: git indexes the pack ("Receiving objects"), as for any real repository
    repo, sha = make_repo(tmp_path / "big", {f"f{i}.txt": f"{i}\n" for i in range(150)})
    calls: list[tuple[int, int | None]] = []
    checkout_commit(str(repo), sha, dest, on_progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1][0] == calls[-1][1] and calls[-1][1] > 150


# --- interrupted fetches ------------------------------------------------------------------------

def _stalled_fetch(tmp_path: Path, dest: Path) -> tuple[subprocess.Popen, Path]:
    """A real `checkout_commit` in another process, stuck mid-fetch: its ssh never answers."""
    marker = tmp_path / "fetching"
    ssh = tmp_path / "stalled-ssh"
    ssh.write_text(f"#!/bin/sh\ntouch {marker}\nexec sleep 60\n")
    ssh.chmod(0o755)
    code = ("from pathlib import Path; from cmx.tools.git import checkout_commit; "
            f"checkout_commit('ssh://git.example.invalid/repo.git', {MISSING!r}, Path({str(dest)!r}))")
    env = {**os.environ, "GIT_SSH_COMMAND": str(ssh), "GIT_SSH_VARIANT": "simple", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True, preexec_fn=interruptible,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), "the fetch never started"
    return proc, marker


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # the stalled ssh and git, if they outlived cmx
    proc.communicate(timeout=30)


def test_an_interrupted_fetch_cleans_up_and_leaves_no_checkout(tmp_path: Path, dest: Path) -> None:
    proc, _ = _stalled_fetch(tmp_path, dest)
    try:
        assert any(name.startswith(".tmp-checkout-") for name in left_behind(dest))  # mid-fetch
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        _kill_group(proc)
    assert proc.returncode != 0
    assert left_behind(dest) == []


def test_a_killed_fetch_never_leaves_a_checkout_and_the_next_one_completes(two_commits, tmp_path: Path,
                                                                           dest: Path) -> None:
    proc, _ = _stalled_fetch(tmp_path, dest)
    try:
        proc.send_signal(signal.SIGKILL)  # no clean-up can run
        proc.wait(timeout=30)
    finally:
        _kill_group(proc)
    assert not dest.exists()  # at most a .tmp- folder, never something that looks complete
    repo, first, _ = two_commits
    checkout_commit(str(repo), first, dest)
    assert (dest / "version.txt").read_text() == "one\n"


# --- submodules ---------------------------------------------------------------------------------

@pytest.fixture
def with_submodule(tmp_path: Path) -> tuple[Path, str, str]:
    """A repository pinning a submodule at its first commit, while the submodule moved on:
    (path of the superproject, its commit, the submodule's pinned commit)."""
    sub, pinned = make_repo(tmp_path / "sub", {"lib.txt": "lib v1\n"})
    commit(sub, {"lib.txt": "lib v2\n"}, "moved on")
    top, _ = make_repo(tmp_path / "top", {"main.txt": "main\n"})
    git(top, "submodule", "add", "-q", str(sub), "libs/sub")
    git(top / "libs" / "sub", "checkout", "-q", pinned)
    return top, commit(top, {}, "pin the submodule"), pinned


def test_submodules_are_checked_out_at_the_commit_the_repository_pins(with_submodule, dest: Path,
                                                                      monkeypatch) -> None:
    top, sha, pinned = with_submodule
    allow_local_submodules(monkeypatch)
    checkout_commit(str(top), sha, dest, submodules=True)
    assert (dest / "libs" / "sub" / "lib.txt").read_text() == "lib v1\n"
    assert git(dest / "libs" / "sub", "rev-parse", "HEAD") == pinned


def test_without_submodules_their_folders_stay_empty(with_submodule, dest: Path) -> None:
    top, sha, _ = with_submodule
    checkout_commit(str(top), sha, dest)
    assert (dest / "main.txt").exists() and list((dest / "libs" / "sub").iterdir()) == []


def test_a_submodule_that_cannot_be_fetched_fails_the_whole_checkout(with_submodule, tmp_path: Path,
                                                                    dest: Path, monkeypatch) -> None:
    top, sha, _ = with_submodule
    allow_local_submodules(monkeypatch)
    shutil.rmtree(tmp_path / "sub")
    with pytest.raises(GitError) as caught:
        checkout_commit(str(top), sha, dest, submodules=True)
    assert caught.value.message.startswith(f"cannot check out the submodules of {top} at {sha}: ")
    assert left_behind(dest) == []


def test_a_submodule_at_a_local_path_is_refused_as_git_does_by_default(with_submodule, dest: Path,
                                                                       monkeypatch) -> None:
    top, sha, _ = with_submodule
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")  # git's defaults, whatever this machine's config says
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    with pytest.raises(GitError) as caught:
        checkout_commit(str(top), sha, dest, submodules=True)
    assert "transport 'file' not allowed" in caught.value.message
    assert "protocol.file.allow" in (caught.value.hint or "")
    assert left_behind(dest) == []


# --- resolve_ref, require_commit_sha, inside --------------------------------------------------------

def test_resolve_ref_gives_the_commit_of_a_branch_a_tag_or_head(two_commits) -> None:
    repo, first, head = two_commits
    git(repo, "tag", "-a", "v1", "-m", "release", first)  # annotated: the commit, not the tag object
    git(repo, "tag", "light", first)
    assert resolve_ref(str(repo), "main") == head
    assert resolve_ref(str(repo), "refs/heads/main") == head
    assert resolve_ref(str(repo), "HEAD") == head
    assert resolve_ref(str(repo), "v1") == first
    assert resolve_ref(str(repo), "refs/tags/v1") == first
    assert resolve_ref(str(repo), "light") == first
    assert resolve_ref(str(repo), MISSING) == MISSING  # a full sha is already pinned


def test_resolve_ref_refuses_an_unknown_or_ambiguous_name(two_commits) -> None:
    repo, first, _ = two_commits
    with pytest.raises(GitError, match="has no branch or tag 'mian'") as caught:
        resolve_ref(str(repo), "mian")
    assert caught.value.hint == "did you mean 'main'?"
    with pytest.raises(GitError) as caught:
        resolve_ref(str(repo), "abc1234")
    assert "git rev-parse abc1234" in (caught.value.hint or "")
    git(repo, "tag", "main", first)  # a tag named like the branch, elsewhere
    with pytest.raises(GitError, match="'main' is both a branch and a tag"):
        resolve_ref(str(repo), "main")


def test_resolve_ref_on_an_unreachable_repository_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(GitError, match=r"cannot list the branches and tags of .*does not appear to be a git"):
        resolve_ref(str(tmp_path / "nope"), "main")


def test_require_commit_sha_accepts_only_a_full_lowercase_sha() -> None:
    require_commit_sha("unused", MISSING)
    for rev in ("", "HEAD", MISSING[:39], MISSING.upper(), MISSING + "0"):
        with pytest.raises(GitError):
            require_commit_sha("/nonexistent/repo", rev)


def test_inside_refuses_a_subdir_that_is_absolute_climbs_out_or_is_missing(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    (checkout / "src").mkdir(parents=True)
    (checkout / "out").symlink_to(tmp_path)
    assert inside(checkout, None) == checkout and inside(checkout, "src") == checkout / "src"
    for bad in ("/etc", "../x", "src/../../x", "out"):
        with pytest.raises(GitError, match="is not inside the checkout"):
            inside(checkout, bad)
    with pytest.raises(GitError, match="does not exist in the checkout"):
        inside(checkout, "docs")


# --- the get-git-repo recipe, end to end ----------------------------------------------------------

def install_recipe(home: Home) -> None:
    shutil.copytree(REPO / "recipes" / "get-git-repo", home.recipes / "get-git-repo")


def cache_entries(home: Home) -> list[str]:
    folder = home.settings.cache / "get-git-repo"
    return [p.name for p in folder.iterdir() if not p.name.startswith(".")] if folder.exists() else []


def cli(home: Home, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CMX, *args], env={**home.env, **(env or {})}, cwd=home.root, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.e2e
def test_get_git_repo_caches_the_checkout_of_the_pinned_commit(home: Home, two_commits) -> None:
    install_recipe(home)
    repo, first, _ = two_commits
    args = ("run", "get git repo", "--input", f"url={repo}", "--input", f"rev={first}")
    built = home.cmx_json(*args)
    path = Path(built["outputs"]["path"])
    assert built["steps"]["get-git-repo"]["status"] == "built" and built["outputs"]["rev"] == first
    assert path.is_relative_to(home.settings.cache)
    assert (path / "version.txt").read_text() == "one\n" and not (path / "src" / "b.py").exists()
    again = home.cmx_json(*args)
    assert again["steps"]["get-git-repo"]["status"] == "cached" and again["outputs"] == built["outputs"]
    sub = home.cmx_json(*args, "--input", "subdir=src")
    assert Path(sub["outputs"]["path"]) == Path(sub["outputs"]["path"]).parent / "src"
    assert sorted(os.listdir(sub["outputs"]["path"])) == ["a.py"]
    assert len(cache_entries(home)) == 2  # subdir changes the output, so it is in the key
    missing = home.cmx(*args, "--input", "subdir=docs")
    assert missing.returncode == 1
    assert f"subdir 'docs' does not exist in {repo} at {first[:12]}" in missing.stderr
    assert len(cache_entries(home)) == 2


@pytest.mark.e2e
def test_get_git_repo_with_submodules(home: Home, with_submodule) -> None:
    install_recipe(home)
    top, sha, _ = with_submodule
    env = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "protocol.file.allow", "GIT_CONFIG_VALUE_0": "always"}
    proc = cli(home, "run", "get git repo", "-i", f"url={top}", "-i", f"rev={sha}", "-i", "submodules=true",
               "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    import json

    path = Path(json.loads(proc.stdout)["outputs"]["path"])
    assert (path / "libs" / "sub" / "lib.txt").read_text() == "lib v1\n"


@pytest.mark.e2e
def test_get_git_repo_with_a_missing_commit_fails_clearly_and_caches_nothing(home: Home, two_commits) -> None:
    install_recipe(home)
    repo, _, _ = two_commits
    proc = home.cmx("run", "get git repo", "--input", f"url={repo}", "--input", f"rev={MISSING}")
    assert proc.returncode == 1
    assert f"commit {MISSING} was not found in {repo}" in proc.stderr
    assert "Traceback" not in proc.stderr and "Error lines received" not in proc.stderr  # said once, by cmx
    assert cache_entries(home) == []


@pytest.mark.e2e
def test_get_git_repo_with_a_branch_says_why_and_which_sha_to_pin(home: Home, two_commits) -> None:
    install_recipe(home)
    repo, _, head = two_commits
    proc = home.cmx("run", "get git repo", "--input", f"url={repo}", "--input", "rev=main")
    assert proc.returncode == 1
    assert "'main' is not a commit" in proc.stderr and "a branch or tag moves" in proc.stderr
    assert head in proc.stderr and "Traceback" not in proc.stderr
    assert cache_entries(home) == []
