"""Extract tar (plain, gz, bz2, xz) and zip archives safely, and decompress lone .gz files: all or nothing."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import re
import secrets
import shutil
import stat
import tarfile
import time
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from cmx.errors import CmxError
from cmx.tools.archive_limits import ArchiveLimits, Budget, shown
from cmx.tools.fs import temp_dir_beside

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is 3.11+

ProgressFn = Callable[[int, int], None]
"""`on_progress(done, total)`: bytes of the archive read so far (tar) or of data written (zip)."""

_CHUNK = 1 << 20
_MAX_ZIP_LINK = 4096  # a zip symlink's target is the entry's content: refuse absurd ones unread
_MAX_HEADER = 1 << 20  # a tar long-name or pax header's content, read into memory whole by tarfile
_HEADER_TYPES = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE,
                 tarfile.SOLARIS_XHDTYPE)
_MAX_HOPS = 40  # like the kernel's limit on symlinks followed in one path lookup
_READ_ERRORS = (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, ValueError)
_UNSAFE_HINT = ("nothing was extracted: an archive with any member that could write outside its folder "
                "is refused whole; check where the archive came from")
_CORRUPT_HINT = "fetch the archive again and check its sha256"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# zipfile: an encrypted entry (RuntimeError) or a compression it lacks, like deflate64 (NotImplementedError)
_ZIP_UNSUPPORTED = (RuntimeError, NotImplementedError)


class ArchiveError(CmxError):
    """An archive cannot be read (not a tar or zip, corrupt, truncated) or extracted."""


class UnsafeArchive(CmxError):
    """An archive holds a member that could write outside the destination; nothing was extracted."""

    def __init__(self, archive: Path, member: str, reason: str) -> None:
        super().__init__(f"unsafe archive {archive}: member {shown(member)} {reason}", hint=_UNSAFE_HINT)
        self.member = member
        self.reason = reason


def extract(archive: Path, dest: Path, *, strip_components: int = 0,
            on_progress: ProgressFn | None = None, limits: ArchiveLimits | None = None) -> list[Path]:
    """Extract `archive` into the new folder `dest`; return the paths it made, in archive order.

    The format is read from the content, not the name. Every member is checked before it is
    written (see `_Tree`), into a temporary folder beside `dest` that is renamed into place only
    when the whole archive passed: a refused or corrupt archive leaves nothing at `dest`.
    Modes follow tarfile's "data" filter: no setuid/setgid/sticky bits, no group or other
    write, owner read-write on files; folders get the default mode; owners are not restored.
    What it writes is bounded by `limits` (cmx.tools.archive_limits; its defaults when None), counted
    on the bytes written: past one, ArchiveTooLarge, and nothing is left at `dest`.
    """
    archive, dest = Path(archive), Path(dest)
    if strip_components < 0:
        raise ArchiveError(f"strip_components must be 0 or more, not {strip_components}")
    _check_readable(archive)
    if dest.exists() or dest.is_symlink():
        raise ArchiveError(f"cannot extract {archive.name} into {dest}: it already exists",
                           hint="extract into a new folder")
    try:
        tmp = temp_dir_beside(dest)
    except OSError as exc:
        raise ArchiveError(f"cannot extract {archive.name} into {dest}: {exc.strerror or exc}") from None
    try:
        budget = Budget(archive, tmp, limits or ArchiveLimits(), archive.stat().st_size)
        budget.check_free()
        tree = _Tree(archive, tmp, strip_components, budget)
        if _is_zip(archive):
            _extract_zip(archive, tree, _Throttled(on_progress))
        else:
            _extract_tar(archive, tree, _Throttled(on_progress))
        tree.finish()
        os.rename(tmp, dest)
    except OSError as exc:
        raise ArchiveError(f"cannot extract {archive.name} into {dest}: {exc.strerror or exc}") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return [dest / rel for rel in tree.made]


def _check_readable(archive: Path) -> None:
    if not archive.exists():
        raise ArchiveError(f"archive {archive} does not exist")
    if not archive.is_file():
        raise ArchiveError(f"archive {archive} is not a file")


def _is_zip(archive: Path) -> bool:
    """Zip or tar, by the first bytes. A tar's last member may itself be a zip, which
    zipfile.is_zipfile (it looks at the end) would take for a zip: so ask it only when the
    start says neither, as for a self-extracting zip."""
    with open(archive, "rb") as f:
        head = f.read(512)
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return True
    if head.startswith((b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")) or head[257:262] == b"ustar":
        return False
    return zipfile.is_zipfile(archive)


class _Throttled:
    """Calls on_progress at most ten times a second, and always for the final figure."""

    def __init__(self, on_progress: ProgressFn | None) -> None:
        self._fn = on_progress
        self._last = 0.0

    def __call__(self, done: int, total: int, *, final: bool = False) -> None:
        if self._fn is None:
            return
        now = time.monotonic()
        if final or now - self._last >= 0.1:
            self._last = now
            self._fn(done, total)


# --- the checks --------------------------------------------------------------------------------

class _Tree:
    """What has been extracted so far into `root`, and the rules every new member must pass.

    A member is refused when its name is absolute or has a `..`; when it is written at or
    through a symlink extracted before it (that is how `link -> /x` then `link/evil` writes
    outside, and how any file could be redirected); when it is a symlink whose target is
    absolute or resolves, through the archive's own symlinks, outside the root; when it is a
    hardlink to anything but a regular file extracted before it; and when it is a device or
    a fifo. Links are resolved from this table, not from the disk, so the verdict does not
    depend on what happens to exist around the destination.
    """

    def __init__(self, archive: Path, root: Path, strip: int, budget: Budget) -> None:
        self.archive = archive
        self.root = root
        self.strip = strip
        self.budget = budget
        self.links: dict[str, str] = {}    # relative path -> symlink target, as in the archive
        self.link_member: dict[str, str] = {}  # relative path -> the member name that made it
        self.files: set[str] = set()       # regular files (hardlink targets must be one of these)
        self.dirs: dict[str, float | None] = {}  # folders made, with the mtime to set at the end
        self.made: list[str] = []
        self.seen_members = 0

    # names

    def place(self, member: str) -> str | None:
        """The path relative to the root where `member` goes; None when stripping leaves nothing."""
        self.seen_members += 1
        self.budget.member(member)
        parts = self.parts(member, member)
        return "/".join(parts[self.strip:]) or None

    def parts(self, member: str, name: str, *, link: bool = False) -> list[str]:
        """`name` split into components; refused when absolute or with a `..` (even one that
        stays inside, like `a/../b`: no honest archive needs it)."""
        what = "is a hardlink to" if link else "has"
        quoted = f" ({shown(name)})" if link else ""  # a member's own name is in the message already
        if name.startswith(("/", "\\")):
            raise UnsafeArchive(self.archive, member, f"{what} an absolute path{quoted}")
        parts = [p for p in name.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise UnsafeArchive(self.archive, member,
                                f"{what} {'a path with ' if link else ''}a '..' component{quoted}")
        return parts

    def check_not_through_link(self, member: str, rel: str) -> None:
        parts = rel.split("/")
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            if prefix in self.links:
                if i == len(parts):
                    raise UnsafeArchive(self.archive, member, f"would replace the symlink {shown(prefix)} "
                                        "extracted before it")
                raise UnsafeArchive(self.archive, member, f"would be written through the symlink {shown(prefix)} "
                                    f"(-> {shown(self.links[prefix])})")

    def resolve(self, rel_dir: str, target: str) -> list[str] | None:
        """Where `target`, read from folder `rel_dir`, ends up, following the archive's own
        symlinks: a list of components under the root, or None when it leaves the root.
        A loop never reaches anything, so it counts as staying inside."""
        out = [p for p in rel_dir.split("/") if p]
        todo = target.split("/")
        hops = 0
        while todo:
            part = todo.pop(0)
            if part in ("", "."):
                continue
            if part == "..":
                if not out:
                    return None
                out.pop()
                continue
            out.append(part)
            link = self.links.get("/".join(out))
            if link is not None:
                if link.startswith("/"):
                    return None
                hops += 1
                if hops > _MAX_HOPS:
                    return out
                out.pop()
                todo = link.split("/") + todo
        return out

    def check_symlink_target(self, member: str, rel: str, target: str) -> None:
        if not target:
            raise UnsafeArchive(self.archive, member, "is a symlink with an empty target")
        if target.startswith("/"):
            raise UnsafeArchive(self.archive, member, f"is a symlink to an absolute path ({shown(target)})")
        if self.resolve(rel.rpartition("/")[0], target) is None:
            raise UnsafeArchive(self.archive, member, f"is a symlink to {shown(target)}, outside the destination")

    def check(self, member: str, rel: str, *, symlink: str | None = None, hardlink: str | None = None) -> str:
        """Every check a member must pass before it is written at `rel`; for a hardlink, returns
        the path of its target."""
        self.check_not_through_link(member, rel)
        if symlink is not None:
            self.check_symlink_target(member, rel, symlink)
        if hardlink is None:
            return ""
        target = "/".join(self.parts(member, hardlink, link=True)[self.strip:])
        if target not in self.files:
            raise UnsafeArchive(self.archive, member, f"is a hardlink to {shown(hardlink)}, which is not a regular "
                                "file extracted before it")
        return target

    # writing

    def mkdir(self, member: str, rel: str, mtime: float | None) -> None:
        self.check(member, rel)
        path = self.root / rel
        if path.is_dir():
            self.dirs[rel] = mtime
        else:
            self._parents(rel)
            self._clear(member, rel, path)
            path.mkdir()
            self.dirs[rel] = mtime
        self.made.append(rel)

    def write_file(self, member: str, rel: str, src: IO[bytes], mode: int, mtime: float | None,
                   read: Callable[[IO[bytes]], bytes]) -> None:
        """Copy `src` to `rel`; `read` takes one chunk (reading errors mean a corrupt archive)."""
        self.check(member, rel)
        path = self.root / rel
        self._parents(rel)
        self._clear(member, rel, path)  # a duplicate name: the later member wins, and never writes into a hardlink
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        written = 0
        with os.fdopen(os.open(path, flags, 0o600), "wb") as out:
            while chunk := read(src):
                out.write(chunk)
                written += len(chunk)
                self.budget.wrote(member, len(chunk), written)
        os.chmod(path, _data_mode(mode))
        _set_mtime(path, mtime)
        self.files.add(rel)
        self.made.append(rel)

    def symlink(self, member: str, rel: str, target: str) -> None:
        self.check(member, rel, symlink=target)
        path = self.root / rel
        self._parents(rel)
        self._clear(member, rel, path)
        os.symlink(target, path)
        self.links[rel] = target
        self.link_member[rel] = member
        self.made.append(rel)

    def hardlink(self, member: str, rel: str, linkname: str) -> None:
        target = self.check(member, rel, hardlink=linkname)
        path = self.root / rel
        self._parents(rel)
        self._clear(member, rel, path)
        os.link(self.root / target, path, follow_symlinks=False)
        self.files.add(rel)
        self.made.append(rel)

    def finish(self) -> None:
        """Re-check every symlink against the complete table: a link accepted early can be made
        to point outside by one extracted later (`c -> a/b/..`, then `a/b -> ..`)."""
        for rel, target in self.links.items():
            if self.resolve(rel.rpartition("/")[0], target) is None:
                raise UnsafeArchive(self.archive, self.link_member[rel],
                                    f"is a symlink to {shown(target)}, which leads outside the destination "
                                    "through other symlinks of the archive")
        if self.seen_members and not self.made:
            raise ArchiveError(f"strip_components={self.strip} removes the whole path of every member of "
                               f"{self.archive.name}: nothing would be extracted",
                               hint="use a smaller strip_components (list the archive: `tar tf` or `unzip -l`)")
        for rel in sorted(self.dirs, key=lambda r: r.count("/"), reverse=True):  # children first
            _set_mtime(self.root / rel, self.dirs[rel])

    def _parents(self, rel: str) -> None:
        parent = rel.rpartition("/")[0]
        if parent:
            (self.root / parent).mkdir(parents=True, exist_ok=True)

    def _clear(self, member: str, rel: str, path: Path) -> None:
        if path.is_dir() and not path.is_symlink():
            raise ArchiveError(f"cannot extract member {shown(member)} of {self.archive.name}: an earlier member "
                               f"made {shown(rel)} a folder")
        if path.exists() or path.is_symlink():
            path.unlink()
            self.files.discard(rel)


def _data_mode(mode: int) -> int:
    """tarfile's "data" filter for files: drop setuid/setgid/sticky and group/other write;
    keep execute only where the owner has it; the owner can always read and write."""
    mode &= 0o755
    if not mode & 0o100:
        mode &= ~0o111
    return mode | 0o600


def _set_mtime(path: Path, mtime: float | None) -> None:
    if mtime is None:
        return
    # a timestamp the file system cannot hold is not worth failing an extraction for
    with contextlib.suppress(OSError, OverflowError, ValueError):
        os.utime(path, (mtime, mtime), follow_symlinks=False)


# --- tar ---------------------------------------------------------------------------------------

def _extract_tar(archive: Path, tree: _Tree, progress: _Throttled) -> None:
    """One streaming pass: members are checked and written in archive order, so a compressed
    archive is decompressed once. Progress is how far into the archive file the reader is."""
    total = archive.stat().st_size
    with open(archive, "rb") as raw:
        try:
            tar = tarfile.open(fileobj=raw, mode="r|*", tarinfo=_StrictTarInfo)  # noqa: SIM115 - `with tar:` below closes it
        except _READ_ERRORS as exc:
            raise ArchiveError(f"{archive} is not a tar (plain, gz, bz2, xz) or zip archive ({_reason(exc)})",
                               hint="check what the file is (`file PATH`); a download may have saved an "
                                    "error page, and a lone .gz or .xz file is not an archive") from None
        with tar:
            for member in _tar_members(archive, tar):
                _extract_tar_member(tar, member, tree, archive)
                # a streamed TarFile keeps every header it read: drop them, or a million members cost gigabytes
                tar.members.clear()  # type: ignore[attr-defined]  # public in tarfile, absent from typeshed
                progress(raw.tell(), total)
        progress(total, total, final=True)


class _StrictTarInfo(tarfile.TarInfo):
    """tarfile takes a bad header after the first for the end of the archive, and stops
    silently: a damaged archive would look complete with half its members. Make it an error;
    only a zero block (the real end marker) or the end of the data ends the archive."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> Self:
        # tarfile reads a long name's or a pax header's whole content into memory: bound it before it does
        if self.type in _HEADER_TYPES and self.size > _MAX_HEADER:
            raise tarfile.ReadError(f"a header extension of {self.size} bytes (cmx reads at most {_MAX_HEADER}; "
                                    "an honest one holds a name and a few fields)")
        return super()._proc_member(tarfile_)  # type: ignore[misc, no-any-return]  # tarfile's private hook, not in typeshed

    @classmethod
    def fromtarfile(cls, tar: tarfile.TarFile) -> Self:
        try:
            return super().fromtarfile(tar)
        # these three are tarfile's own but not in its __all__, so typeshed leaves them out (the ignores below);
        # SubsequentHeaderError is the one tarfile.next() raises
        except (tarfile.InvalidHeaderError, tarfile.TruncatedHeaderError) as exc:  # type: ignore[attr-defined]  # typeshed
            raise tarfile.SubsequentHeaderError(str(exc)) from None  # type: ignore[attr-defined]  # typeshed lacks it


def _tar_members(archive: Path, tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    while True:
        try:
            member = tar.next()
        except _READ_ERRORS as exc:
            raise _corrupt(archive, exc) from None
        if member is None:
            return
        yield member


def _extract_tar_member(tar: tarfile.TarFile, member: tarfile.TarInfo, tree: _Tree, archive: Path) -> None:
    name = member.name
    if member.ischr() or member.isblk() or member.isfifo():
        kind = "a character device" if member.ischr() else "a block device" if member.isblk() else "a fifo"
        raise UnsafeArchive(archive, name, f"is {kind}")
    if not (member.isreg() or member.isdir() or member.issym() or member.islnk()):
        raise UnsafeArchive(archive, name, f"has an unsupported type ({member.type!r})")
    rel = tree.place(name)
    if rel is None:
        return
    if member.isreg():
        tree.budget.declared(name, member.size)
    tree.check(name, rel, symlink=member.linkname if member.issym() else None,
               hardlink=member.linkname if member.islnk() else None)
    _second_opinion(member, rel, tree)
    if member.isdir():
        tree.mkdir(name, rel, member.mtime)
    elif member.issym():
        tree.symlink(name, rel, member.linkname)
    elif member.islnk():
        tree.hardlink(name, rel, member.linkname)
    else:
        try:
            src = tar.extractfile(member)
        except _READ_ERRORS as exc:
            raise _corrupt(archive, exc, name) from None
        assert src is not None  # a regular member always has a file object
        tree.write_file(name, rel, src, member.mode, member.mtime, _reader(archive, name))


def _reader(archive: Path, member: str) -> Callable[[IO[bytes]], bytes]:
    def read(src: IO[bytes]) -> bytes:
        try:
            return src.read(_CHUNK)
        except _READ_ERRORS as exc:
            raise _corrupt(archive, exc, member) from None
    return read


def _second_opinion(member: tarfile.TarInfo, rel: str, tree: _Tree) -> None:
    """Python's own "data" filter (3.12, and 3.8-3.11 security releases) as a second check, after
    ours: it looks at the real files on disk, ours at the archive's table. Ours is stricter, so
    it should never be the one to refuse; when it does, that is still a refusal."""
    data_filter = getattr(tarfile, "data_filter", None)
    if data_filter is None:
        return
    renamed = member.replace(name=rel, deep=False)
    if member.islnk():
        renamed = renamed.replace(linkname=tree.check(member.name, rel, hardlink=member.linkname), deep=False)
    try:
        data_filter(renamed, str(tree.root))
    except tarfile.FilterError as exc:
        raise UnsafeArchive(tree.archive, member.name, f"is refused by tarfile's data filter ({exc})") from None


# --- zip ---------------------------------------------------------------------------------------

def _extract_zip(archive: Path, tree: _Tree, progress: _Throttled) -> None:
    try:
        zf = zipfile.ZipFile(archive)
    except _READ_ERRORS as exc:
        raise _corrupt(archive, exc) from None
    with zf:
        infos = zf.infolist()
        total = sum(i.file_size for i in infos)
        # refused before the first byte when the sizes it declares pass a limit
        tree.budget.declared_total(total, len(infos))
        done = 0
        for info in infos:
            _extract_zip_member(zf, info, tree, archive)
            done += info.file_size
            progress(done, total)
        progress(total, total, final=True)


def _extract_zip_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, tree: _Tree, archive: Path) -> None:
    name = info.filename
    unix_mode = info.external_attr >> 16 if info.create_system == 3 else 0  # 3: made on Unix
    kind = stat.S_IFMT(unix_mode)
    if kind in (stat.S_IFCHR, stat.S_IFBLK, stat.S_IFIFO, stat.S_IFSOCK):
        raise UnsafeArchive(archive, name, f"is {_zip_kind(kind)}")
    rel = tree.place(name)
    if rel is None:
        return
    tree.budget.declared(name, info.file_size)
    mtime = _zip_mtime(info)
    if info.is_dir() or kind == stat.S_IFDIR:
        tree.mkdir(name, rel, mtime)
    elif kind == stat.S_IFLNK:
        if info.file_size > _MAX_ZIP_LINK:
            raise UnsafeArchive(archive, name, f"is a symlink whose target is {info.file_size} bytes long")
        target = os.fsdecode(_zip_read(zf, info, archive))
        tree.symlink(name, rel, target)
    else:
        try:
            src = zf.open(info)
        except _READ_ERRORS as exc:
            raise _corrupt(archive, exc, name) from None
        except _ZIP_UNSUPPORTED as exc:
            raise ArchiveError(f"cannot read member {shown(name)} of {archive}: {exc}",
                               hint="cmx reads zip entries that are stored, deflated, bzip2 or lzma, "
                                    "without a password") from None
        with src:
            tree.write_file(name, rel, src, unix_mode & 0o7777 or 0o644, mtime, _reader(archive, name))


def _zip_read(zf: zipfile.ZipFile, info: zipfile.ZipInfo, archive: Path) -> bytes:
    try:
        return zf.read(info)
    except _READ_ERRORS as exc:
        raise _corrupt(archive, exc, info.filename) from None


def _zip_kind(kind: int) -> str:
    return {stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
            stat.S_IFIFO: "a fifo", stat.S_IFSOCK: "a socket"}[kind]


def _zip_mtime(info: zipfile.ZipInfo) -> float | None:
    try:
        return time.mktime((*info.date_time, 0, 0, -1))
    except (OverflowError, ValueError):
        return None


# --- a lone .gz file ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Gunzipped:
    """What gunzip() wrote: the file at `path`, its size and sha256, and whether the sha256 was checked."""

    path: Path
    size: int
    sha256: str
    verified: bool


def gunzip(src: Path, dest: Path, *, sha256: str | None = None, on_progress: ProgressFn | None = None,
           what: str | None = None, limits: ArchiveLimits | None = None) -> Gunzipped:
    """Decompress the gzip file `src` into the file `dest`, hashing what is written; return it.

    The bytes go to a temporary file beside `dest`, renamed to `dest` (replacing one there)
    only when the gzip stream is whole and, when `sha256` is given, the decompressed content
    matches it: a corrupt or truncated `src` or a mismatch raises ArchiveError and leaves
    nothing new. `src` is left as it is. `on_progress(done, total)` counts bytes of `src` read,
    like extract(). `what` names the content in messages (default: `src`). What it writes is bounded as
    extract()'s is (`limits`: total and member bytes, ratio, free space): past one, ArchiveTooLarge.
    """
    src, dest = Path(src), Path(dest)
    expected = _expected_sha256(sha256)
    what = what or str(src)
    _check_readable(src)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".tmp-{dest.name}-{os.getpid()}-{secrets.token_hex(4)}")
    progress, total = _Throttled(on_progress), src.stat().st_size
    hasher, size = hashlib.sha256(), 0
    # the caller's recipe has no limit inputs: a genuine file past the defaults is decompressed by hand
    budget = Budget(src, dest.parent, limits or ArchiveLimits(), total, verb="decompress",
                    raise_with="decompress it yourself (gunzip) and give cmx the file")
    try:
        budget.check_free()
        with open(src, "rb") as raw, gzip.GzipFile(fileobj=raw, mode="rb") as stream, open(tmp, "wb") as out:
            while block := _gunzip_read(stream, what):
                out.write(block)
                hasher.update(block)
                size += len(block)
                budget.wrote(dest.name, len(block), size)
                progress(raw.tell(), total)
            out.flush()
            os.fsync(out.fileno())  # the bytes are on disk before the rename publishes them
        digest = hasher.hexdigest()
        if expected is not None and digest != expected:
            raise ArchiveError(f"sha256 mismatch for {what}: expected {expected}, got {digest}; the decompressed file "
                               "was removed", hint="if the file changed upstream, check it and pin the new sha256; "
                                                   "otherwise fetch it again")
        os.replace(tmp, dest)
    except OSError as exc:
        raise ArchiveError(f"cannot decompress {src.name} into {dest}: {exc.strerror or exc}",
                           hint="check free space and permissions of that folder") from None
    finally:
        tmp.unlink(missing_ok=True)
    progress(total, total, final=True)
    return Gunzipped(dest, size, digest, expected is not None)


def _gunzip_read(stream: gzip.GzipFile, what: str) -> bytes:
    try:
        return stream.read(_CHUNK)
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise ArchiveError(f"{what} is not a valid gzip file: {_reason(exc)}",
                           hint="fetch it again; if it fails again, check where it comes from") from None


def _expected_sha256(sha256: str | None) -> str | None:
    if sha256 is None:
        return None
    value = sha256.strip().lower().removeprefix("sha256:")
    if not _SHA256.match(value):
        raise ArchiveError(f"sha256 {shown(sha256)} is not a sha256 digest: it needs 64 hex digits",
                           hint="copy the digest from the publisher, or compute it with `sha256sum FILE`")
    return value


# --- errors ------------------------------------------------------------------------------------

def _corrupt(archive: Path, exc: BaseException, member: str | None = None) -> ArchiveError:
    at = f" at member {shown(member)}" if member else ""
    return ArchiveError(f"{archive} is corrupt or truncated{at}: {_reason(exc)}", hint=_CORRUPT_HINT)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text[0].lower() + text[1:] if text else text


__all__ = ["ArchiveError", "Gunzipped", "ProgressFn", "UnsafeArchive", "extract", "gunzip"]
