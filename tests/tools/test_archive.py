"""cmx/tools/archive.py and recipes/extract-archive: safe, all-or-nothing extraction of tar and zip."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import shutil
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from cmx.tools.archive import ArchiveError, UnsafeArchive, extract, gunzip
from tests.conftest import REPO, Home

MTIME = 1_600_000_000

Member = tuple[tarfile.TarInfo, bytes | None]


# --- building archives ----------------------------------------------------------------------------

def reg(name: str, data: bytes = b"data\n", mode: int = 0o644) -> Member:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, MTIME
    return info, data


def folder(name: str) -> Member:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, MTIME
    return info, None


def link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> Member:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mtime = kind, target, MTIME
    return info, None


def hardlink(name: str, target: str) -> Member:
    return link(name, target, tarfile.LNKTYPE)


def special(name: str, kind: bytes) -> Member:
    info = tarfile.TarInfo(name)
    info.type, info.devmajor, info.devminor = kind, 1, 3
    return info, None


def make_tar(path: Path, members: list[Member], mode: str = "w:gz") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, mode, format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def make_zip(path: Path, entries: list[tuple[str, bytes, int | None]]) -> Path:
    """Entries (name, data, unix mode); mode None makes a DOS entry as Windows tools write it, with
    no Unix mode; a mode with S_IFLNK makes `data` a symlink target."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name, date_time=(2020, 9, 13, 12, 26, 40))
            if mode is None:
                info.create_system, info.external_attr = 0, 0x10 if name.endswith("/") else 0x20  # DOS attributes
            else:
                info.create_system, info.external_attr = 3, mode << 16
            zf.writestr(info, data)
    return path


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """Where archives are extracted to; its parent holds nothing else, to see leftovers."""
    parent = tmp_path / "out"
    parent.mkdir()
    return parent / "dest"


def left_behind(dest: Path) -> list[str]:
    return sorted(p.name for p in dest.parent.iterdir())


# --- what a good archive gives --------------------------------------------------------------------

def test_a_tar_gz_extracts_contents_modes_mtimes_and_internal_links(tmp_path: Path, out: Path) -> None:
    archive = make_tar(tmp_path / "good.tar.gz", [
        folder("pkg"), reg("pkg/README", b"hello\n"), reg("pkg/bin/run.sh", b"#!/bin/sh\n", 0o755),
        reg("pkg/setuid", b"x", 0o4777), reg("pkg/readonly", b"r", 0o444), reg("pkg/private", b"p", 0o600),
        link("pkg/latest", "README"), link("pkg/bin/up", "../README"), link("pkg/bin/here", "."),
        hardlink("pkg/again", "pkg/README"), folder("pkg/empty"),
    ])
    made = extract(archive, out)
    root = out / "pkg"
    assert (root / "README").read_bytes() == b"hello\n"
    assert (root / "bin" / "run.sh").read_bytes() == b"#!/bin/sh\n"
    assert stat.S_IMODE((root / "bin" / "run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((root / "setuid").stat().st_mode) == 0o755  # no setuid, no group/other write
    assert stat.S_IMODE((root / "readonly").stat().st_mode) == 0o644  # the owner can always write
    assert stat.S_IMODE((root / "private").stat().st_mode) == 0o600
    assert os.readlink(root / "latest") == "README" and (root / "latest").read_text() == "hello\n"
    assert (root / "bin" / "up").read_text() == "hello\n"
    assert (root / "again").stat().st_ino == (root / "README").stat().st_ino
    assert (root / "empty").is_dir()
    assert (root / "README").stat().st_mtime == MTIME and (root / "bin").stat().st_mtime != 0
    assert made[0] == root and made[1] == root / "README" and len(made) == 11
    assert left_behind(out) == ["dest"]


@pytest.mark.parametrize("mode", ["w", "w:bz2", "w:xz"])
def test_plain_bz2_and_xz_tars_are_recognised_by_content_not_by_name(tmp_path: Path, out: Path, mode: str) -> None:
    archive = make_tar(tmp_path / "misnamed.zip", [reg("a.txt", b"A")], mode)
    extract(archive, out)
    assert (out / "a.txt").read_bytes() == b"A"


def test_a_zip_extracts_contents_modes_and_internal_symlinks(tmp_path: Path, out: Path) -> None:
    archive = make_zip(tmp_path / "good.zip", [
        ("pkg/", b"", stat.S_IFDIR | 0o755),
        ("pkg/README", b"hello\n", stat.S_IFREG | 0o644),
        ("pkg/run.sh", b"#!/bin/sh\n", stat.S_IFREG | 0o755),
        ("pkg/latest", b"README", stat.S_IFLNK | 0o777),
        ("pkg/from-windows.txt", b"w", None),
    ])
    made = extract(archive, out)
    root = out / "pkg"
    assert (root / "README").read_bytes() == b"hello\n"
    assert stat.S_IMODE((root / "run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((root / "from-windows.txt").stat().st_mode) == 0o644
    assert os.readlink(root / "latest") == "README" and (root / "latest").read_text() == "hello\n"
    assert made == [root, root / "README", root / "run.sh", root / "latest", root / "from-windows.txt"]


def test_a_tar_extracts_through_a_stream_of_many_members(tmp_path: Path, out: Path) -> None:
    archive = make_tar(tmp_path / "many.tar.xz", [reg(f"d{i % 7}/f{i}", str(i).encode()) for i in range(300)], "w:xz")
    made = extract(archive, out)
    assert len(made) == 300 and (out / "d5" / "f299").read_text() == "299"


def test_a_later_member_of_the_same_name_wins_without_writing_into_a_hardlink(tmp_path: Path, out: Path) -> None:
    archive = make_tar(tmp_path / "dup.tar", [reg("a", b"one"), hardlink("b", "a"), reg("b", b"two")], "w")
    extract(archive, out)
    assert (out / "a").read_bytes() == b"one" and (out / "b").read_bytes() == b"two"


def test_progress_reports_bytes_up_to_the_total(tmp_path: Path, out: Path) -> None:
    archive = make_tar(tmp_path / "p.tar.gz", [reg("big", os.urandom(3 << 20))])
    calls: list[tuple[int, int]] = []
    extract(archive, out, on_progress=lambda done, total: calls.append((done, total)))
    size = archive.stat().st_size
    assert calls[-1] == (size, size)
    assert all(total == size and 0 <= done <= size for done, total in calls)


# --- strip_components -----------------------------------------------------------------------------

def test_strip_components_drops_leading_folders_including_of_hardlink_targets(tmp_path: Path, out: Path) -> None:
    archive = make_tar(tmp_path / "pkg.tar.gz", [
        folder("./pkg-1.0"), reg("./pkg-1.0/a", b"A"), reg("./pkg-1.0/sub/b", b"B"),
        hardlink("./pkg-1.0/h", "./pkg-1.0/a"),
    ])
    made = extract(archive, out, strip_components=1)
    assert sorted(p.relative_to(out).as_posix() for p in made) == ["a", "h", "sub/b"]
    assert (out / "sub" / "b").read_bytes() == b"B" and (out / "h").read_bytes() == b"A"


def test_strip_components_applies_to_zips_too(tmp_path: Path, out: Path) -> None:
    archive = make_zip(tmp_path / "pkg.zip", [("top/", b"", None), ("top/a", b"A", None)])
    extract(archive, out, strip_components=1)
    assert sorted(os.listdir(out)) == ["a"]


def test_strip_components_that_leaves_nothing_is_an_error(tmp_path: Path, out: Path) -> None:
    archive = make_tar(tmp_path / "pkg.tar.gz", [folder("pkg"), reg("pkg/a")])
    with pytest.raises(ArchiveError, match="strip_components=2 removes the whole path of every member"):
        extract(archive, out, strip_components=2)
    assert left_behind(out) == []


def test_a_negative_strip_components_is_refused(tmp_path: Path, out: Path) -> None:
    archive = make_tar(tmp_path / "pkg.tar.gz", [reg("a")])
    with pytest.raises(ArchiveError, match="strip_components must be 0 or more"):
        extract(archive, out, strip_components=-1)


# --- unsafe archives: refused whole, dest never appears ------------------------------------------

UNSAFE_TARS = {
    "absolute path": ([reg("/etc/evil")], "/etc/evil", "has an absolute path"),
    "dotdot": ([reg("../x")], "../x", "has a '..' component"),
    "nested dotdot": ([folder("a"), reg("a/../../x")], "a/../../x", "has a '..' component"),
    "dotdot that stays inside": ([folder("a"), reg("a/../b")], "a/../b", "has a '..' component"),
    "symlink to /etc": ([link("etc", "/etc")], "etc", "is a symlink to an absolute path ('/etc')"),
    "symlink up and out": ([folder("a"), link("a/up", "../..")], "a/up", "is a symlink to '../..', outside"),
    "symlink through a symlink": ([link("a", "."), link("b", "a/..")], "b", "outside the destination"),
    "symlink chain made outside later": (
        [folder("a"), link("c", "a/b/.."), link("a/b", "..")], "c", "leads outside the destination through other"),
    "empty symlink": ([link("empty", "")], "empty", "empty target"),
    "hardlink escaping": ([hardlink("h", "../../etc/passwd")], "h", "is a hardlink to a path with a '..' component"),
    "hardlink absolute": ([hardlink("h", "/etc/passwd")], "h", "is a hardlink to an absolute path"),
    "hardlink to nothing extracted": (
        [hardlink("h", "later"), reg("later")], "h", "not a regular file extracted before"),
    "hardlink to a symlink": ([link("l", "x"), hardlink("h", "l")], "h", "not a regular file extracted before"),
    "write through an internal symlink": (
        [folder("sub"), link("link", "sub"), reg("link/evil")], "link/evil", "written through the symlink 'link'"),
    "replace a symlink": ([link("link", "x"), reg("link")], "link", "would replace the symlink 'link'"),
    "character device": ([special("null", tarfile.CHRTYPE)], "null", "is a character device"),
    "block device": ([special("sda", tarfile.BLKTYPE)], "sda", "is a block device"),
    "fifo": ([special("pipe", tarfile.FIFOTYPE)], "pipe", "is a fifo"),
}


@pytest.fixture(params=[True, False], ids=["with-data-filter", "without-data-filter"])
def data_filter(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Our checks must hold alone, as on a Python without tarfile's data filter."""
    if not request.param:
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    return request.param


@pytest.mark.parametrize("case", UNSAFE_TARS, ids=list(UNSAFE_TARS))
def test_an_unsafe_tar_member_is_refused_by_name_and_nothing_is_extracted(
        tmp_path: Path, out: Path, case: str, data_filter: bool) -> None:
    members, member, reason = UNSAFE_TARS[case]
    archive = make_tar(tmp_path / "bad.tar.gz", [reg("first-ok", b"fine"), *members, reg("last-ok")])
    with pytest.raises(UnsafeArchive) as caught:
        extract(archive, out)
    assert caught.value.member == member
    assert f"unsafe archive {archive}: member {member!r}" in str(caught.value)
    assert reason in str(caught.value)
    assert not out.exists() and left_behind(out) == []


def test_a_symlink_out_then_a_file_through_it_writes_nothing_outside(tmp_path: Path, out: Path,
                                                                       data_filter: bool) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    archive = make_tar(tmp_path / "bad.tar", [link("link", str(outside)), reg("link/evil", b"owned")], "w")
    with pytest.raises(UnsafeArchive, match="member 'link' is a symlink to an absolute path"):
        extract(archive, out)
    assert list(outside.iterdir()) == [] and not out.exists()


def test_a_relative_symlink_out_then_a_file_through_it_writes_nothing_outside(tmp_path: Path, out: Path,
                                                                                data_filter: bool) -> None:
    archive = make_tar(tmp_path / "bad.tar", [link("link", "../../outside"), reg("link/evil", b"owned")], "w")
    (tmp_path / "outside").mkdir()
    with pytest.raises(UnsafeArchive, match=r"member 'link' is a symlink to '../../outside', outside"):
        extract(archive, out)
    assert list((tmp_path / "outside").iterdir()) == [] and not out.exists()


UNSAFE_ZIPS = {
    "absolute path": ([("/etc/evil", b"x", None)], "/etc/evil", "has an absolute path"),
    "dotdot": ([("../x", b"x", None)], "../x", "has a '..' component"),
    "nested dotdot": ([("a/../../x", b"x", None)], "a/../../x", "has a '..' component"),
    "symlink to /etc": ([("etc", b"/etc", stat.S_IFLNK | 0o777)], "etc", "is a symlink to an absolute path"),
    "symlink up and out": ([("a/up", b"../..", stat.S_IFLNK | 0o777)], "a/up", "outside the destination"),
    "write through a symlink": (
        [("sub/", b"", None), ("link", b"sub", stat.S_IFLNK | 0o777), ("link/evil", b"x", None)],
        "link/evil", "written through the symlink 'link'"),
    "fifo": ([("pipe", b"", stat.S_IFIFO | 0o644)], "pipe", "is a fifo"),
    "character device": ([("null", b"", stat.S_IFCHR | 0o644)], "null", "is a character device"),
}


@pytest.mark.parametrize("case", UNSAFE_ZIPS, ids=list(UNSAFE_ZIPS))
def test_an_unsafe_zip_entry_is_refused_by_name_and_nothing_is_extracted(tmp_path: Path, out: Path, case: str) -> None:
    entries, member, reason = UNSAFE_ZIPS[case]
    archive = make_zip(tmp_path / "bad.zip", [("first-ok", b"fine", None), *entries])
    with pytest.raises(UnsafeArchive) as caught:
        extract(archive, out)
    assert caught.value.member == member and reason in str(caught.value)
    assert not out.exists() and left_behind(out) == []


# --- archives that cannot be read ---------------------------------------------------------------

def test_a_truncated_tar_gz_is_corrupt_and_leaves_nothing(tmp_path: Path, out: Path) -> None:
    whole = make_tar(tmp_path / "whole.tar.gz", [reg("a", os.urandom(200_000)), reg("b", os.urandom(200_000))])
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    with pytest.raises(ArchiveError, match="is corrupt or truncated"):
        extract(cut, out)
    assert left_behind(out) == []


def test_a_tar_with_a_damaged_header_is_corrupt(tmp_path: Path, out: Path) -> None:
    data = bytearray(make_tar(tmp_path / "ok.tar", [reg("a", b"x" * 600), reg("b", b"y")], "w").read_bytes())
    data[1536 + 148: 1536 + 156] = b"9999999\0"  # the second header's checksum
    bad = tmp_path / "bad.tar"
    bad.write_bytes(bytes(data))
    with pytest.raises(ArchiveError, match="is corrupt or truncated"):
        extract(bad, out)
    assert left_behind(out) == []


def test_a_zip_with_a_bad_crc_is_corrupt(tmp_path: Path, out: Path) -> None:
    good = tmp_path / "good.zip"
    with zipfile.ZipFile(good, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("a.txt", b"A" * 100)
    data = bytearray(good.read_bytes())
    data[data.index(b"A" * 100)] = ord("B")
    bad = tmp_path / "bad.zip"
    bad.write_bytes(bytes(data))
    with pytest.raises(ArchiveError, match=r"is corrupt or truncated at member 'a.txt'.*CRC"):
        extract(bad, out)
    assert left_behind(out) == []


def _patched_zip(tmp_path: Path, local_offset: int, central_offset: int, value: int) -> Path:
    """A one-entry stored zip with one 2-byte field set in both its local and central headers."""
    good = tmp_path / "good.zip"
    with zipfile.ZipFile(good, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("a.txt", b"A" * 100)
    data = bytearray(good.read_bytes())
    for signature, offset in ((b"PK\x03\x04", local_offset), (b"PK\x01\x02", central_offset)):
        at = data.index(signature) + offset
        data[at:at + 2] = value.to_bytes(2, "little")
    bad = tmp_path / "bad.zip"
    bad.write_bytes(bytes(data))
    return bad


@pytest.mark.parametrize("local_offset, central_offset, value, said", [
    (6, 8, 0x1, "encrypted"),                # general purpose flag: encrypted
    (8, 10, 9, "compression method"),        # method 9: deflate64, which zipfile cannot read
], ids=["encrypted", "deflate64"])
def test_a_zip_entry_zipfile_cannot_read_is_an_archive_error(tmp_path: Path, out: Path, local_offset: int,
                                                             central_offset: int, value: int, said: str) -> None:
    bad = _patched_zip(tmp_path, local_offset, central_offset, value)
    with pytest.raises(ArchiveError, match=f"cannot read member 'a.txt' of {bad}: .*{said}") as caught:
        extract(bad, out)
    assert "without a password" in (caught.value.hint or "")
    assert left_behind(out) == []


@pytest.mark.parametrize("content", [b"<html>404 not found</html>\n" * 40, b""], ids=["html", "empty"])
def test_a_file_that_is_no_archive_is_an_archive_error(tmp_path: Path, out: Path, content: bytes) -> None:
    path = tmp_path / "page.tar.gz"
    path.write_bytes(content)
    with pytest.raises(ArchiveError, match=r"is not a tar \(plain, gz, bz2, xz\) or zip archive") as caught:
        extract(path, out)
    assert "error page" in (caught.value.hint or "")
    assert left_behind(out) == []


def test_a_missing_archive_is_an_archive_error(tmp_path: Path, out: Path) -> None:
    with pytest.raises(ArchiveError, match="does not exist"):
        extract(tmp_path / "nope.tar", out)


def test_an_existing_destination_is_never_extracted_into(tmp_path: Path, out: Path) -> None:
    archive = make_tar(tmp_path / "a.tar.gz", [reg("a")])
    out.mkdir()
    (out / "mine").write_text("keep")
    with pytest.raises(ArchiveError, match="already exists"):
        extract(archive, out)
    assert os.listdir(out) == ["mine"]


def test_a_member_that_turns_a_file_into_a_folder_is_an_archive_error(tmp_path: Path, out: Path) -> None:
    archive = make_tar(tmp_path / "a.tar", [folder("x"), reg("x")], "w")
    with pytest.raises(ArchiveError, match=r"member 'x'.*an earlier member made 'x' a folder"):
        extract(archive, out)
    assert left_behind(out) == []


# --- the extract-archive recipe, end to end -----------------------------------------------------

def install_recipe(home: Home) -> None:
    shutil.copytree(REPO / "recipes" / "extract-archive", home.recipes / "extract-archive")


def cache_entries(home: Home) -> list[str]:
    folder_ = home.settings.cache / "extract-archive"
    return [p.name for p in folder_.iterdir() if not p.name.startswith(".")] if folder_.exists() else []


@pytest.mark.e2e
def test_extract_archive_recipe_caches_the_extracted_folder(home: Home, tmp_path: Path) -> None:
    install_recipe(home)
    archive = make_tar(tmp_path / "pkg.tar.gz", [folder("pkg-1.0"), reg("pkg-1.0/a.txt", b"A"),
                                                 link("pkg-1.0/b", "a.txt")])
    first = home.cmx_json("run", "extract archive", "--input", f"archive={archive}", "--input", "strip_components=1")
    path = Path(first["outputs"]["path"])
    assert first["steps"]["extract-archive"]["status"] == "built"
    assert path.is_relative_to(home.settings.cache) and sorted(os.listdir(path)) == ["a.txt", "b"]
    assert (path / "b").read_text() == "A"
    second = home.cmx_json("run", "extract archive", "--input", f"archive={archive}", "--input", "strip_components=1")
    assert second["steps"]["extract-archive"]["status"] == "cached" and second["outputs"] == first["outputs"]
    verify = home.cmx("cache", "verify", check=True)
    assert "problem" not in verify.stdout.lower()


@pytest.mark.e2e
def test_extract_archive_recipe_refuses_an_unsafe_tar_with_no_traceback_and_no_entry(home: Home,
                                                                                     tmp_path: Path) -> None:
    install_recipe(home)
    archive = make_tar(tmp_path / "evil.tar.gz", [reg("ok"), reg("../../escape", b"owned")])
    proc = home.cmx("run", "extract archive", "--input", f"archive={archive}")
    assert proc.returncode == 1, proc.stderr
    assert "unsafe archive" in proc.stderr and "member '../../escape'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert cache_entries(home) == []
    assert not (home.root.parent / "escape").exists()


# --- gunzip: a lone .gz file ----------------------------------------------------------------------

GZ_DATA = b"".join(b"row %d of a pickle-sized file\n" % i for i in range(50_000))  # about 1.5 MB
GZ_SHA = hashlib.sha256(GZ_DATA).hexdigest()


def gz_file(tmp_path: Path, data: bytes = GZ_DATA) -> Path:
    path = tmp_path / "data.pkl.gz"
    path.write_bytes(gzip.compress(data, mtime=0))
    return path


def leftovers(folder_: Path) -> list[str]:
    return sorted(p.name for p in folder_.iterdir())


def test_gunzip_writes_the_content_and_returns_its_size_and_sha256(tmp_path: Path) -> None:
    src = gz_file(tmp_path)
    progress: list[tuple[int, int]] = []
    got = gunzip(src, tmp_path / "out" / "data.pkl", on_progress=lambda done, total: progress.append((done, total)))
    assert got.path.read_bytes() == GZ_DATA and got.path == tmp_path / "out" / "data.pkl"
    assert (got.size, got.sha256, got.verified) == (len(GZ_DATA), GZ_SHA, False)
    assert progress[-1] == (src.stat().st_size, src.stat().st_size)
    assert src.is_file() and leftovers(tmp_path / "out") == ["data.pkl"]  # the source is the caller's


def test_gunzip_checks_the_sha256_of_the_decompressed_content(tmp_path: Path) -> None:
    got = gunzip(gz_file(tmp_path), tmp_path / "data.pkl", sha256=f" sha256:{GZ_SHA.upper()} ")
    assert got.verified and got.sha256 == GZ_SHA


def test_gunzip_with_a_sha256_mismatch_names_both_digests_and_leaves_nothing(tmp_path: Path) -> None:
    src = gz_file(tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "data.pkl").write_bytes(b"the previous version")
    with pytest.raises(ArchiveError) as info:
        gunzip(src, tmp_path / "out" / "data.pkl", sha256="0" * 64, what="the pickle from https://example.org/x.gz")
    assert info.value.message == (f"sha256 mismatch for the pickle from https://example.org/x.gz: expected {'0' * 64}, "
                                  f"got {GZ_SHA}; the decompressed file was removed")
    assert (tmp_path / "out" / "data.pkl").read_bytes() == b"the previous version"  # replaced only on success
    assert leftovers(tmp_path / "out") == ["data.pkl"]


@pytest.mark.parametrize("damage", ["not gzip", "truncated", "corrupt stream", "bad crc"])
def test_gunzip_of_a_damaged_file_is_a_clear_error_and_leaves_nothing(tmp_path: Path, damage: str) -> None:
    src = gz_file(tmp_path)
    raw = src.read_bytes()
    src.write_bytes({"not gzip": b"<html>an error page</html>\n",
                     "truncated": raw[:len(raw) // 2],
                     "corrupt stream": raw[:20] + bytes(b ^ 0x5A for b in raw[20:60]) + raw[60:],
                     "bad crc": raw[:-8] + bytes(b ^ 0xFF for b in raw[-8:-4]) + raw[-4:]}[damage])
    with pytest.raises(ArchiveError, match=r"is not a valid gzip file: ") as info:
        gunzip(src, tmp_path / "out" / "data.pkl", sha256=GZ_SHA)
    assert info.value.message.startswith(str(src)) and info.value.hint
    assert leftovers(tmp_path / "out") == []


def test_gunzip_refuses_a_malformed_sha256_or_a_missing_source_before_writing(tmp_path: Path) -> None:
    with pytest.raises(ArchiveError, match="sha256 'abc' is not a sha256 digest: it needs 64 hex digits"):
        gunzip(gz_file(tmp_path), tmp_path / "out" / "data.pkl", sha256="abc")
    with pytest.raises(ArchiveError, match="does not exist"):
        gunzip(tmp_path / "missing.gz", tmp_path / "out" / "data.pkl")
    assert not (tmp_path / "out").exists()
