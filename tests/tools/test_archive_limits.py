"""Archive bombs: cmx.tools.archive_limits' bounds on what extract() and gunzip() write, counted while streaming,
with the partial extraction removed; and the extract-archive recipe's inputs that raise them."""

from __future__ import annotations

import gzip
import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from cmx.errors import InputError
from cmx.tools.archive import ArchiveError, extract, gunzip
from cmx.tools.archive_limits import GIB, RATIO_FLOOR, ArchiveLimits, ArchiveTooLarge
from tests.conftest import Home
from tests.tools.test_archive import cache_entries, install_recipe, left_behind, make_zip, out, reg

__all__ = ["out"]  # the fixture, imported for these tests

MIB = 1 << 20


def zeros_tar(path: Path, sizes: list[int], mode: str = "w:gz") -> Path:
    """A tar of members full of zeros (compressed, a few KB per 10 MiB with gzip; far less with bz2 or xz)."""
    with tarfile.open(path, mode) as tar:
        for i, size in enumerate(sizes):
            info = tarfile.TarInfo(f"bomb/zeros-{i}.bin")
            info.size = size
            tar.addfile(info, io.BytesIO(bytes(size)))
    return path


def refused(exc: pytest.ExceptionInfo[ArchiveTooLarge], archive: Path, limit: str, input_name: str) -> str:
    err = exc.value
    text = str(err)
    assert err.limit == limit
    assert str(archive) in err.message and f"--input {input_name}=N" in (err.hint or "")
    assert "\n" not in err.message
    return text


def test_a_tar_gz_past_the_total_limit_is_refused_and_nothing_is_left(tmp_path: Path, out: Path) -> None:
    archive = zeros_tar(tmp_path / "bomb.tar.gz", [MIB] * 6)  # each member small, together over 4 MiB
    with pytest.raises(ArchiveTooLarge) as exc:
        extract(archive, out, limits=ArchiveLimits(max_total_bytes=4 * MIB))
    text = refused(exc, archive, "max_total_bytes", "max_total_gib")
    assert "4 MiB limit on the total" in text
    assert left_behind(out) == []


def test_the_total_is_counted_on_bytes_written_not_on_a_declared_size(tmp_path: Path, out: Path) -> None:
    # the header's 8 MiB is under the member limit, so nothing refuses it up front: the total is counted as the
    # member streams, and refused a chunk past 3 MiB
    archive = zeros_tar(tmp_path / "bomb.tar.gz", [8 * MIB])
    with pytest.raises(ArchiveTooLarge) as exc:
        extract(archive, out, limits=ArchiveLimits(max_total_bytes=3 * MIB, max_member_bytes=GIB))
    assert exc.value.limit == "max_total_bytes"
    assert left_behind(out) == []


def test_a_member_past_the_member_limit_is_refused_by_its_header_before_it_is_written(tmp_path: Path,
                                                                                       out: Path) -> None:
    archive = zeros_tar(tmp_path / "bomb.tar.gz", [MIB, 5 * MIB])
    with pytest.raises(ArchiveTooLarge) as exc:
        extract(archive, out, limits=ArchiveLimits(max_member_bytes=2 * MIB))
    text = refused(exc, archive, "max_member_bytes", "max_member_gib")
    assert "'bomb/zeros-1.bin' declares 5 MiB" in text
    assert left_behind(out) == []


@pytest.mark.parametrize("kind", ["tar", "zip"])
def test_an_archive_with_more_members_than_the_limit_is_refused(tmp_path: Path, out: Path, kind: str) -> None:
    if kind == "tar":
        archive = tmp_path / "many.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            for i in range(50):
                info, data = reg(f"f{i}", b"")
                tar.addfile(info, io.BytesIO(data))
    else:
        archive = make_zip(tmp_path / "many.zip", [(f"f{i}", b"", 0o100644) for i in range(50)])
    with pytest.raises(ArchiveTooLarge) as exc:
        extract(archive, out, limits=ArchiveLimits(max_members=10))
    refused(exc, archive, "max_members", "max_members")
    assert left_behind(out) == []


@pytest.mark.parametrize("mode", ["w:gz", "w:bz2", "w:xz"])
def test_a_compressed_tar_of_zeros_is_refused_by_the_default_ratio(tmp_path: Path, out: Path, mode: str) -> None:
    archive = zeros_tar(tmp_path / f"bomb.tar.{mode[2:]}", [RATIO_FLOOR + 8 * MIB])
    with pytest.raises(ArchiveTooLarge) as exc:
        extract(archive, out)  # the defaults: nothing lowered
    text = refused(exc, archive, "max_ratio", "max_ratio")
    assert "more than 200 times its own size" in text
    assert left_behind(out) == []


def test_a_zip_bomb_is_refused_by_its_declared_sizes_before_a_byte_is_written(tmp_path: Path, out: Path) -> None:
    archive = tmp_path / "bomb.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for i in range(3):
            zf.writestr(f"zeros-{i}", bytes(8 * MIB))
    with pytest.raises(ArchiveTooLarge) as exc:
        extract(archive, out)
    assert "declares more than 200 times its own size" in refused(exc, archive, "max_ratio", "max_ratio")
    assert left_behind(out) == []


def test_an_archive_the_ratio_admits_below_the_floor_is_extracted(tmp_path: Path, out: Path) -> None:
    # 4 MiB of zeros is 1,000 times its gzip, but a small archive of compressible files is not a bomb
    archive = zeros_tar(tmp_path / "small.tar.gz", [4 * MIB])
    made = extract(archive, out)
    assert (out / "bomb" / "zeros-0.bin").stat().st_size == 4 * MIB and len(made) == 1


def test_raising_a_limit_admits_the_archive_it_refused(tmp_path: Path, out: Path) -> None:
    archive = zeros_tar(tmp_path / "big.tar.gz", [3 * MIB])
    with pytest.raises(ArchiveTooLarge):
        extract(archive, out, limits=ArchiveLimits(max_total_bytes=2 * MIB))
    extract(archive, out, limits=ArchiveLimits(max_total_bytes=4 * MIB))
    assert (out / "bomb" / "zeros-0.bin").stat().st_size == 3 * MIB


def test_extraction_that_would_leave_too_little_free_space_is_refused_before_writing(tmp_path: Path,
                                                                                     out: Path) -> None:
    archive = zeros_tar(tmp_path / "small.tar.gz", [MIB])
    with pytest.raises(ArchiveTooLarge) as exc:
        extract(archive, out, limits=ArchiveLimits(min_free_bytes=1 << 60))  # an exbibyte: no disk has it free
    err = exc.value
    assert err.limit == "min_free_bytes" and "less than 1.074e+09 GiB free on" in err.message
    assert "lower the limit with --input min_free_gib=N" in (err.hint or "")
    assert left_behind(out) == []


def test_a_tar_header_extension_too_large_to_read_is_refused(tmp_path: Path, out: Path) -> None:
    archive = tmp_path / "huge-header.tar"
    with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT) as tar:
        first, data = reg("first")
        tar.addfile(first, io.BytesIO(data or b""))
        info, data = reg("second")
        info.pax_headers = {"comment": "x" * (2 * MIB)}  # tarfile would read all of it into memory
        tar.addfile(info, io.BytesIO(data or b""))
    with pytest.raises(ArchiveError, match=r"header extension of \d+ bytes"):
        extract(archive, out)
    assert left_behind(out) == []


def test_gunzip_of_a_gzip_bomb_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    src = tmp_path / "bomb.pkl.gz"
    src.write_bytes(gzip.compress(bytes(RATIO_FLOOR + 8 * MIB), mtime=0))
    dest = tmp_path / "out" / "data.pkl"
    with pytest.raises(ArchiveTooLarge) as exc:
        gunzip(src, dest)
    assert exc.value.limit == "max_ratio" and "refused to decompress" in exc.value.message
    assert "decompress it yourself" in (exc.value.hint or "")
    assert list(dest.parent.iterdir()) == []


@pytest.mark.parametrize("field", ["max_total_bytes", "max_member_bytes", "max_members", "max_ratio"])
def test_a_limit_of_zero_is_an_input_error_naming_the_input(field: str) -> None:
    with pytest.raises(InputError, match="--input max_"):
        ArchiveLimits(**{field: 0})


@pytest.mark.e2e
def test_extract_archive_recipe_refuses_a_bomb_in_one_line_and_its_input_raises_the_limit(home: Home,
                                                                                         tmp_path: Path) -> None:
    install_recipe(home)
    archive = zeros_tar(tmp_path / "bomb.tar.gz", [2 * MIB])
    proc = home.cmx("run", "extract archive", "--input", f"archive={archive}", "--input", "max_total_gib=0.001")
    assert proc.returncode == 1, proc.stderr
    assert "limit on the total" in proc.stderr and "--input max_total_gib=N" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert cache_entries(home) == []
    ok = home.cmx_json("run", "extract archive", "--input", f"archive={archive}", "--input", "max_total_gib=0.01")
    assert (Path(ok["outputs"]["path"]) / "bomb" / "zeros-0.bin").stat().st_size == 2 * MIB
