"""The bounds on what extracting or decompressing an archive may write: total bytes, bytes of one member, members,
compression ratio, and the free space left on the destination.

The defaults admit every archive an MLPerf Inference benchmark cmx runs can come in, with room to spare, and
refuse what only a bomb does:

- total: 1 TiB. The largest weights a benchmark serves (llama3.1-405b in BF16, about 810 GB; deepseek-r1 in
  FP8, about 690 GB) fit whole; every dataset (LibriSpeech for whisper, about 700 MB; the OpenOrca, llama3.1,
  deepseek-r1 and gpt-oss pickles, under 2 GB each; qwen3-vl's product images, a few GB) fits many times.
- one member: 64 GiB. Weight shards are 5-10 GB (safetensors) or up to 17 GB (llama2-70b's consolidated .pth);
  no dataset file comes near it.
- members: 1,000,000. LibriSpeech's largest split (train-other-500, about 150,000 files), COCO's train2017
  (118,000 images) and ImageNet's validation set (50,000) fit; each member costs an inode and a header read.
- ratio: 200 bytes written per byte of archive, judged once 16 MiB were written (a small archive of a few text
  files may compress further). Text and pickles compress 3-10 times, weights barely; gzip of zeros is 1,000
  times, bzip2 and xz of zeros far more.
- free space: 1 GiB left on the destination's file system, checked before and while writing (a zip's declared
  sizes before the first byte), so a full disk does not fail the cache, the logs and every other step.

Each is counted on the bytes actually written, never on a header's word: a tar header or a zip entry may lie
about its size, and a sparse tar member expands past what the archive holds.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from cmx.errors import CmxError, InputError, cut_repr

GIB = 1 << 30
MIB = 1 << 20
RATIO_FLOOR = 16 * MIB     # the ratio is judged only past this many bytes written
FREE_CHECK_EVERY = 64 * MIB  # how often (bytes written) the free space is looked at again
# the extract-archive recipe's inputs, by limit: named in every refusal so the user knows what raises it
INPUTS = {"max_total_bytes": "max_total_gib", "max_member_bytes": "max_member_gib", "max_members": "max_members",
          "max_ratio": "max_ratio", "min_free_bytes": "min_free_gib"}


class ArchiveTooLarge(CmxError):
    """An archive would write more than a limit allows (a bomb, or a real archive past the defaults); whatever
    was extracted of it was removed."""

    def __init__(self, archive: Path, what: str, limit: str, *, lower: bool = False, raise_with: str | None = None,
                 verb: str = "extract") -> None:
        change = "lower" if lower else "raise"
        how = raise_with or f"{change} the limit with --input {INPUTS[limit]}=N"
        super().__init__(f"refused to {verb} {archive}: {what}; what was written of it was removed",
                         hint=f"an archive that expands like this is a bomb or damaged; if it is genuine, {how}")
        self.archive = archive
        self.limit = limit


@dataclass(frozen=True)
class ArchiveLimits:
    """The bounds of one extraction (see the module's docstring for the defaults and why)."""

    max_total_bytes: int = 1024 * GIB
    max_member_bytes: int = 64 * GIB
    max_members: int = 1_000_000
    max_ratio: float = 200.0
    min_free_bytes: int = 1 * GIB

    @classmethod
    def from_inputs(cls, *, max_total_gib: float, max_member_gib: float, max_members: int, max_ratio: float,
                    min_free_gib: float) -> ArchiveLimits:
        """The limits as the extract-archive recipe's inputs give them (sizes in GiB)."""
        return cls(int(max_total_gib * GIB), int(max_member_gib * GIB), max_members, max_ratio,
                   int(min_free_gib * GIB))

    def __post_init__(self) -> None:
        for limit in ("max_total_bytes", "max_member_bytes", "max_members", "max_ratio"):
            if getattr(self, limit) <= 0:
                raise InputError(f"--input {INPUTS[limit]} must be above 0, not {getattr(self, limit)}")
        if self.min_free_bytes < 0:
            raise InputError(f"--input min_free_gib must be 0 or more, not {self.min_free_bytes / GIB:g}")


def shown(name: str, limit: int = 80) -> str:
    """A member's name as a message echoes it: repr (a newline shows as \\n), cut to `limit` characters."""
    return cut_repr(name, limit)


def _size(n: float) -> str:
    if n >= GIB:
        return f"{n / GIB:.4g} GiB"
    return f"{n / MIB:.4g} MiB" if n >= MIB else f"{int(n)} bytes"


class Budget:
    """What one extraction has written so far, refused past its limits (ArchiveTooLarge).

    `archive_size` is the archive file's size, the ratio's denominator: using the whole file, not the part read
    so far, can only let an honest archive through sooner.
    """

    def __init__(self, archive: Path, folder: Path, limits: ArchiveLimits, archive_size: int, *,
                 raise_with: str | None = None, verb: str = "extract") -> None:
        self.archive = archive
        self._raise_with = raise_with
        self._verb = verb
        self.folder = folder
        self.limits = limits
        self.archive_size = max(archive_size, 1)
        self.total = 0
        self.members = 0
        self._next_free_check = FREE_CHECK_EVERY

    def member(self, name: str) -> None:
        """One more member (of any kind) is about to be extracted."""
        self.members += 1
        if self.members > self.limits.max_members:
            raise self._refuse( f"it has more than {self.limits.max_members:,} members (the limit; "
                                                f"{shown(name)} is one past it)", "max_members")

    def declared(self, name: str, size: int) -> None:
        """A member's declared size, refused before a byte is written when it alone passes the member limit."""
        if size > self.limits.max_member_bytes:
            raise self._refuse( f"member {shown(name)} declares {_size(size)}, over the "
                                                f"{_size(self.limits.max_member_bytes)} limit on one member",
                                  "max_member_bytes")

    def declared_total(self, total: int, members: int) -> None:
        """A zip's declared sizes and members, all known before the first byte: refused up front when they pass a
        limit."""
        if members > self.limits.max_members:
            raise self._refuse( f"it has {members:,} members, more than the limit of "
                                                f"{self.limits.max_members:,}", "max_members")
        self._check_total(total, "declares")
        self._check_ratio(total, "declares")
        self.check_free(total)

    def wrote(self, name: str, n: int, member_bytes: int) -> None:
        """`n` more bytes were written, `member_bytes` of them so far to member `name`."""
        self.total += n
        if member_bytes > self.limits.max_member_bytes:
            raise self._refuse( f"member {shown(name)} expands past the "
                                                f"{_size(self.limits.max_member_bytes)} limit on one member",
                                  "max_member_bytes")
        self._check_total(self.total, "expands")
        self._check_ratio(self.total, "expands")
        if self.total >= self._next_free_check:
            self._next_free_check = self.total + FREE_CHECK_EVERY
            self.check_free()

    def check_free(self, still_to_write: int = 0) -> None:
        """Refuse when writing `still_to_write` more bytes would leave less than the margin free."""
        try:
            free = shutil.disk_usage(self.folder).free
        except OSError:
            return  # the write itself will say what is wrong with the folder
        if free - still_to_write < self.limits.min_free_bytes:
            need = f"{_size(still_to_write)} more would leave" if still_to_write else "it would leave"
            raise self._refuse( f"{need} less than {_size(self.limits.min_free_bytes)} free on "
                                                f"{self.folder.parent} ({_size(free)} free)", "min_free_bytes",
                                  lower=True)

    def _refuse(self, what: str, limit: str, *, lower: bool = False) -> ArchiveTooLarge:
        return ArchiveTooLarge(self.archive, what, limit, lower=lower, raise_with=self._raise_with, verb=self._verb)

    def _check_total(self, total: int, verb: str) -> None:
        if total > self.limits.max_total_bytes:
            raise self._refuse( f"it {verb} more than the {_size(self.limits.max_total_bytes)} "
                                                "limit on the total", "max_total_bytes")

    def _check_ratio(self, total: int, verb: str) -> None:
        if total > RATIO_FLOOR and total > self.limits.max_ratio * self.archive_size:
            raise self._refuse( f"it {verb} more than {self.limits.max_ratio:g} times its own size "
                                                f"({_size(self.archive_size)} -> over {_size(total)}), the limit on "
                                                "the compression ratio", "max_ratio")


__all__ = ["GIB", "INPUTS", "RATIO_FLOOR", "ArchiveLimits", "ArchiveTooLarge", "Budget", "shown"]
