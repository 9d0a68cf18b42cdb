"""The little git ha-bot needs: resolve refs, find the merge-base, check a commit out in a worktree."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from typing import NamedTuple

from ha_bot.errors import HaBotError


class Base(NamedTuple):
    sha: str
    ref: str
    note: str  # "" when the merge-base was found; otherwise what we fell back to and why


def git(repo: str, *args: str) -> str:
    try:
        proc = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise HaBotError("git is not installed") from None
    if proc.returncode != 0:
        raise HaBotError(f"git {' '.join(args)} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip()


def toplevel(path: str) -> str:
    try:
        return git(path, "rev-parse", "--show-toplevel")
    except HaBotError:
        raise HaBotError(f"{os.path.abspath(path)} is not inside a git repository: `ha-bot diff` compares git commits "
                         "(use `ha-bot analyze` for a single tree)") from None


def rev_parse(repo: str, ref: str) -> str:
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except HaBotError:
        raise HaBotError(f"unknown git ref {ref!r} in {repo} (fetch it, or pass --base/--head)") from None


def default_base(repo: str) -> str:
    """GITHUB_BASE_REF's remote branch on Actions, else origin/HEAD, origin/main, main, master."""
    candidates = []
    if os.environ.get("GITHUB_BASE_REF"):
        candidates += [f"origin/{os.environ['GITHUB_BASE_REF']}", os.environ["GITHUB_BASE_REF"]]
    candidates += ["origin/HEAD", "origin/main", "origin/master", "main", "master"]
    for ref in candidates:
        with contextlib.suppress(HaBotError):
            rev_parse(repo, ref)
            return ref
    raise HaBotError("no base branch found (tried origin/HEAD, origin/main, main, master): pass --base REF")


def merge_base(repo: str, base_ref: str, head_sha: str) -> Base:
    """The merge-base of base and head; when there is none (shallow clone, unrelated histories) the
    base tip, with a note saying so."""
    base_sha = rev_parse(repo, base_ref)
    try:
        return Base(git(repo, "merge-base", base_sha, head_sha), base_ref, "")
    except HaBotError:
        shallow = git(repo, "rev-parse", "--is-shallow-repository") == "true"
        why = "the clone is shallow (use fetch-depth: 0)" if shallow else "the histories share no commit"
        return Base(base_sha, base_ref, f"no merge-base of {base_ref} and head: {why}; compared with the tip of {base_ref}")


@contextlib.contextmanager
def worktree(repo: str, sha: str) -> Iterator[str]:
    """A detached worktree of ``sha``, removed afterwards."""
    parent = tempfile.mkdtemp(prefix="ha-bot-tree-")
    path = os.path.join(parent, "tree")
    git(repo, "worktree", "add", "--detach", "--quiet", path, sha)
    try:
        yield path
    finally:
        with contextlib.suppress(HaBotError):
            git(repo, "worktree", "remove", "--force", path)
        shutil.rmtree(parent, ignore_errors=True)
        with contextlib.suppress(HaBotError):
            git(repo, "worktree", "prune")
