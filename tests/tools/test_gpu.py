"""GPU detection (cmx/tools/gpu.py).

No GPU is on the test machine, so the parsers are fed recorded outputs of the real tools
(nvidia-smi, nvcc, amd-smi, rocm-smi) kept in tests/data/gpu; each sample has a .source.md
naming where it was recorded, on which GPU, and whether it is a verbatim recording or was
constructed (from a real machine's values or from the tool's documented format). Detection is
given a runner that replays those outputs: `detect_gpus` takes its command runner as an argument
(the recipe passes one around ctx.run_cmd), so this injects the tools' output, it mocks no part
of cmx. Detection also runs for real on this machine, GPU-less, through subprocess.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from cmx.devices.cuda import NVIDIA_SMI_FIELDS as NVIDIA_FIELDS
from cmx.errors import CommandFailed, StepError
from cmx.tools.gpu import (
    Gpu,
    GpuReport,
    check_bounds,
    detect_gpus,
    parse_amd_smi_static,
    parse_hipconfig_version,
    parse_nvcc_version,
    parse_nvidia_smi_csv,
    parse_nvidia_smi_header,
    parse_rocm_smi,
    parse_rocm_version_file,
    parse_version,
    require_cuda_driver,
    require_cuda_toolkit,
    require_rocm,
    subprocess_runner,
    toolkit_newer_than_driver,
    version_in_range,
    visible_gpu_count,
    wanted,
)
from tests.conftest import DATA

GPU_DATA = DATA / "gpu"
SAMPLES = sorted(p for p in GPU_DATA.iterdir() if not p.name.endswith(".source.md"))


def sample(name: str) -> str:
    return (GPU_DATA / name).read_text(encoding="utf-8")


# --- the samples ---------------------------------------------------------------------------

@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_every_sample_names_its_source_and_whether_it_was_recorded(path: Path) -> None:
    source = (path.parent / (path.name + ".source.md")).read_text(encoding="utf-8")
    kind = next(line for line in source.splitlines() if "**Kind:**" in line).split("**Kind:**")[1].strip()
    assert kind.startswith(("recorded", "constructed from documentation, not recorded",
                            "constructed from a real recording, not itself recorded"))
    assert "**Command:**" in source or "**File:**" in source


# --- nvidia-smi ----------------------------------------------------------------------------

def test_nvidia_smi_csv_of_eight_h100s_gives_each_gpu_with_memory_bus_and_uuid() -> None:
    gpus = parse_nvidia_smi_csv(sample("nvidia-smi-query-h100x8.csv"))
    assert [g.index for g in gpus] == list(range(8))
    assert {g.name for g in gpus} == {"NVIDIA H100 80GB HBM3"}
    assert {g.memory_mib for g in gpus} == {81559} and {g.driver for g in gpus} == {"565.57.01"}
    assert gpus[0] == Gpu("nvidia", 0, "NVIDIA H100 80GB HBM3", 81559, "565.57.01", "00000000:18:00.0",
                          "GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1")
    assert gpus[7].bus_id == "00000000:DB:00.0" and len({g.uuid for g in gpus}) == 8


def test_nvidia_smi_csv_of_one_l40s_gives_one_gpu() -> None:
    [gpu] = parse_nvidia_smi_csv(sample("nvidia-smi-query-l40s.csv"))
    assert (gpu.name, gpu.memory_mib, gpu.driver, gpu.bus_id) == ("NVIDIA L40S", 46068, "550.127.05",
                                                                  "00000000:A1:00.0")


def test_nvidia_smi_csv_without_header_is_read_in_the_query_column_order() -> None:
    rows = sample("nvidia-smi-query-h100x8.csv").splitlines()[1:]
    assert parse_nvidia_smi_csv("\n".join(rows)) == parse_nvidia_smi_csv(sample("nvidia-smi-query-h100x8.csv"))


def test_nvidia_smi_csv_with_units_left_in_still_reads_the_memory() -> None:
    text = sample("nvidia-smi-query-l40s.csv").replace(", 46068,", ", 46068 MiB,")
    assert parse_nvidia_smi_csv(text)[0].memory_mib == 46068


def test_real_csv_of_other_columns_is_read_by_name_and_na_cells_are_empty() -> None:
    [gpu] = parse_nvidia_smi_csv(sample("nvidia-smi-query-tesla-p100.csv"))
    assert gpu == Gpu("nvidia", 0, "Tesla P100-PCIE-16GB", 0, "", "", "GPU-ef1b2c9b-38d8-2090-2bd1-f567a3eb42a6")


@pytest.mark.parametrize("text, says", [
    (sample("nvidia-smi-failed.txt"), "fields"),
    ("index, name, memory.total [MiB], driver_version, pci.bus_id, uuid\n0, NVIDIA H100, 81559\n", "3 fields"),
    ("index, memory.total [MiB]\n0, 81559\n", "no 'name' column"),
    ("0, , 81559, 565.57.01, 00000000:18:00.0, GPU-x\n", "no GPU name"),
])
def test_unexpected_nvidia_smi_output_is_a_value_error(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_nvidia_smi_csv(text)


def test_empty_nvidia_smi_output_is_no_gpu() -> None:
    assert parse_nvidia_smi_csv("\n") == []


def test_nvidia_smi_banner_gives_the_driver_and_the_cuda_version_it_supports() -> None:
    assert parse_nvidia_smi_header(sample("nvidia-smi-h100x8.txt")) == ("565.57.01", "12.7")
    assert parse_nvidia_smi_header(sample("nvidia-smi-l40s.txt")) == ("550.127.05", "12.4")
    # the same two lines of `nvidia-smi -q` (thamada/nvidia-smi nvsim/H100SXMx8_smi.py, out_a)
    assert parse_nvidia_smi_header("Driver Version                            : 565.57.01\n"
                                   "CUDA Version                              : 12.7\n") == ("565.57.01", "12.7")
    # bigstack-oss/cubecos#312: a vGPU host's `nvidia-smi -q` says "Not Found"
    assert parse_nvidia_smi_header("Driver Version                            : 580.105.06\n"
                                   "CUDA Version                              : Not Found\n") == ("580.105.06", "")


# --- nvcc ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name, release, build", [
    ("nvcc-13.0.txt", "13.0", "13.0.88"),
    ("nvcc-11.1.txt", "11.1", "11.1.105"),
    ("nvcc-10.1.txt", "10.1", "10.1.243"),
])
def test_nvcc_version_gives_the_release_and_nvccs_own_build(name: str, release: str, build: str) -> None:
    version = parse_nvcc_version(sample(name))
    assert (version.release, version.build) == (release, build)


def test_nvcc_output_without_a_release_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="release"):
        parse_nvcc_version("nvcc fatal   : Unknown option '--version'\n")


# --- amd-smi and rocm-smi ------------------------------------------------------------------

def test_amd_smi_static_of_four_mi300x_gives_name_memory_bus_and_driver() -> None:
    gpus = parse_amd_smi_static(sample("amd-smi-static-mi300x.json"))
    assert [g.index for g in gpus] == [0, 1, 2, 3]
    assert gpus[0] == Gpu("amd", 0, "AMD Instinct MI300X", 196592, "6.7.0", "0000:26:00.0", "")
    assert gpus[3].bus_id == "0000:85:00.0"


def test_amd_smi_static_of_rocm_7_wraps_the_gpus_in_gpu_data() -> None:
    listed = json.loads(sample("amd-smi-static-mi300x.json"))
    assert parse_amd_smi_static(json.dumps({"gpu_data": listed})) == parse_amd_smi_static(json.dumps(listed))


def test_amd_smi_warning_lines_before_the_json_are_skipped() -> None:
    text = "WARNING: User is missing the following required groups: render, video.\n" + \
        sample("amd-smi-static-mi300x.json")
    assert len(parse_amd_smi_static(text)) == 4


@pytest.mark.parametrize("size, mib", [
    ({"value": 196592, "unit": "MB"}, 196592),
    ("196592 MB", 196592),
    (196592, 196592),
    ({"value": 206141652992, "unit": "B"}, 196592),
    ({"value": "N/A", "unit": "MB"}, 0),
])
def test_amd_smi_vram_size_is_read_in_each_shape_amd_smi_has_printed(size: object, mib: int) -> None:
    entry = json.loads(sample("amd-smi-static-mi300x.json"))[0]
    entry["vram"]["size"] = size
    assert parse_amd_smi_static(json.dumps([entry]))[0].memory_mib == mib


def test_amd_smi_name_falls_back_to_the_board_when_the_market_name_is_na() -> None:
    entry = json.loads(sample("amd-smi-static-mi300x.json"))[0]
    entry["asic"]["market_name"] = "N/A"
    assert parse_amd_smi_static(json.dumps([entry]))[0].name == "AMD Instinct MI300X OAM"


@pytest.mark.parametrize("text", ["", "not json at all", '{"error": "no GPU"}', '[{"asic": {}}]', "42"])
def test_unexpected_amd_smi_output_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_amd_smi_static(text)


def test_rocm_smi_json_of_a_radeon_gives_name_and_memory() -> None:
    [gpu] = parse_rocm_smi(sample("rocm-smi-rx7900xt.json"))
    assert gpu == Gpu("amd", 0, "Radeon RX 7900 XT", 21458059264 // (1 << 20), "", "", "")


def test_rocm_smi_key_spellings_and_the_system_block_are_read() -> None:
    text = json.dumps({"system": {"Driver version": "6.7.0"},
                       "card1": {"Card series": "AMD Instinct MI300X", "VRAM Total Memory (B)": "206141652992",
                                 "PCI Bus": "0000:46:00.0", "Unique ID": "0xb4fa34630e85d42a"},
                       "card0": {"Card series": "AMD Instinct MI300X", "VRAM Total Memory (B)": "206141652992",
                                 "PCI Bus": "0000:26:00.0", "Unique ID": "N/A"}})
    gpus = parse_rocm_smi(text)
    assert [(g.index, g.bus_id, g.uuid, g.driver, g.memory_mib) for g in gpus] == [
        (0, "0000:26:00.0", "", "6.7.0", 196592), (1, "0000:46:00.0", "0xb4fa34630e85d42a", "6.7.0", 196592)]


def test_rocm_version_file_and_hipconfig_give_the_rocm_release() -> None:
    assert parse_rocm_version_file(sample("rocm-info-version.txt")) == "6.2.0"
    assert parse_hipconfig_version(sample("hipconfig-version.txt")) == "6.2"
    with pytest.raises(ValueError):
        parse_rocm_version_file("rocm\n")


# --- versions ------------------------------------------------------------------------------

def test_versions_parse_with_build_suffixes_dropped() -> None:
    assert parse_version("12.4") == (12, 4)
    assert parse_version("6.2.0-66") == (6, 2, 0)
    assert parse_version("V12.4.131") == (12, 4, 131)
    for bad in ("", "twelve", "12..4", "12.x"):
        with pytest.raises(ValueError):
            parse_version(bad)


@pytest.mark.parametrize("found, minimum, maximum, ok", [
    ("12.4", "12.4", None, True),
    ("12.2", "12.4", None, False),
    ("12.4", "12.4.1", None, False),
    ("12.4.131", None, "12.4", True),  # a bound is compared at the precision it is written with
    ("12.4.131", None, "12.4.0", False),
    ("12.5", None, "12.4", False),
    ("13.0", "12", "13", True),
    ("6.2.0", "6.0", "6.2", True),
])
def test_a_found_version_is_within_the_bounds_at_their_precision(found: str, minimum: str | None,
                                                                  maximum: str | None, ok: bool) -> None:
    assert version_in_range(found, minimum, maximum) is ok


def test_wanted_says_the_range_in_words() -> None:
    assert (wanted("12.4", None), wanted(None, "12.6"), wanted("12.4", "12.6"), wanted(None, None)) == (
        ">= 12.4", "<= 12.6", ">= 12.4 and <= 12.6", "any version")


def test_bounds_that_are_not_versions_or_cross_are_refused() -> None:
    with pytest.raises(StepError, match="version_min 'latest' is not a version"):
        check_bounds("latest", None)
    with pytest.raises(StepError, match=r"version_min 12.6 is above version_max 12.4"):
        check_bounds("12.6", "12.4")


# --- detection, with the tools' recorded output replayed -----------------------------------

class Replay:
    """A command runner that answers each program (by name and first argument) with a recorded
    output and exit status, and remembers what it was asked."""

    def __init__(self, answers: dict[tuple[str, str], tuple[int, str]]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> subprocess.CompletedProcess:
        self.calls.append(list(argv))
        key = (Path(argv[0]).name, argv[1] if len(argv) > 1 else "")
        code, output = next((v for k, v in self.answers.items() if key[0] == k[0] and key[1].startswith(k[1])),
                            (127, f"{key[0]}: not recorded"))
        return subprocess.CompletedProcess(list(argv), code, stdout=output)


def tools(folder: Path, *names: str) -> Path:
    """Executables named `names` in `folder`, for the PATH lookup; the runner answers for them."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = folder / name
        path.write_text("#!/bin/sh\nexit 99\n")
        path.chmod(0o755)
    return folder


H100 = {("nvidia-smi", "--query-gpu"): (0, sample("nvidia-smi-query-h100x8.csv")),
        ("nvidia-smi", ""): (0, sample("nvidia-smi-h100x8.txt")),
        ("nvcc", "--version"): (0, sample("nvcc-13.0.txt"))}


def nowhere(tmp_path: Path) -> dict[str, str]:
    """Defaults that point at empty folders, so this machine's own /usr/local/cuda is not seen."""
    return {"cuda_default": str(tmp_path / "no-cuda"), "rocm_default": str(tmp_path / "no-rocm")}


def test_detection_reports_eight_h100s_the_driver_and_both_cuda_versions(tmp_path: Path) -> None:
    env = {"PATH": str(tools(tmp_path / "bin", "nvidia-smi", "nvcc"))}
    report = detect_gpus(Replay(H100), env, **nowhere(tmp_path))
    assert len(report.of("nvidia")) == 8 and report.vendor == "nvidia" and report.nvidia_reason == ""
    assert (report.driver_version, report.cuda_driver_version) == ("565.57.01", "12.7")
    assert (report.cuda_version, report.nvcc_version) == ("13.0", "13.0.88")
    assert report.nvcc == str(tmp_path / "bin" / "nvcc")
    assert report.gpus_visible == 8
    assert "amd-smi" in report.amd_reason and "hipconfig" in report.rocm_reason


def test_an_absent_nvidia_smi_is_no_nvidia_gpu_with_a_reason_and_nothing_is_run(tmp_path: Path) -> None:
    runner = Replay(H100)
    report = detect_gpus(runner, {"PATH": str(tools(tmp_path / "bin"))}, **nowhere(tmp_path))
    assert report.gpus == () and report.vendor == "none"
    assert report.nvidia_reason == "nvidia-smi is not on PATH"
    assert report.cuda_version == "" and "nvcc is not on PATH" in report.cuda_reason
    assert runner.calls == []


@pytest.mark.parametrize("status", [1, 9])
def test_a_failing_nvidia_smi_is_no_nvidia_gpu_with_its_message(tmp_path: Path, status: int) -> None:
    runner = Replay({("nvidia-smi", ""): (status, sample("nvidia-smi-failed.txt"))})
    report = detect_gpus(runner, {"PATH": str(tools(tmp_path / "bin", "nvidia-smi"))}, **nowhere(tmp_path))
    assert report.of("nvidia") == ()
    assert f"exited with status {status}" in report.nvidia_reason
    assert "couldn't communicate with the NVIDIA driver" in report.nvidia_reason


def test_garbage_from_nvidia_smi_is_no_nvidia_gpu(tmp_path: Path) -> None:
    runner = Replay({("nvidia-smi", ""): (0, "Segmentation fault (core dumped)\n\x00\x01")})
    report = detect_gpus(runner, {"PATH": str(tools(tmp_path / "bin", "nvidia-smi"))}, **nowhere(tmp_path))
    assert report.of("nvidia") == () and "printed something unexpected" in report.nvidia_reason


def test_a_killed_nvidia_smi_is_no_nvidia_gpu(tmp_path: Path) -> None:
    runner = Replay({("nvidia-smi", ""): (-9, "")})
    report = detect_gpus(runner, {"PATH": str(tools(tmp_path / "bin", "nvidia-smi"))}, **nowhere(tmp_path))
    assert "was killed by signal 9" in report.nvidia_reason


@pytest.mark.parametrize("error", [FileNotFoundError(2, "No such file or directory"),
                                   CommandFailed("cannot start `nvidia-smi`: Permission denied", tail=[])])
def test_a_program_that_cannot_be_started_is_no_gpu(tmp_path: Path, error: Exception) -> None:
    def refuse(argv: Sequence[str]) -> subprocess.CompletedProcess:
        raise error

    report = detect_gpus(refuse, {"PATH": str(tools(tmp_path / "bin", "nvidia-smi", "amd-smi"))}, **nowhere(tmp_path))
    assert report.gpus == ()
    assert "could not be started" in report.nvidia_reason and "could not be started" in report.amd_reason


def test_amd_gpus_come_from_amd_smi_and_rocm_from_its_version_file(tmp_path: Path) -> None:
    rocm = tmp_path / "rocm"
    (rocm / ".info").mkdir(parents=True)
    (rocm / ".info" / "version").write_text(sample("rocm-info-version.txt"))
    tools(rocm / "bin", "amd-smi", "hipconfig")  # not on PATH: found in $ROCM_PATH/bin
    runner = Replay({("amd-smi", "static"): (0, sample("amd-smi-static-mi300x.json"))})
    report = detect_gpus(runner, {"PATH": str(tools(tmp_path / "bin")), "ROCM_PATH": str(rocm)}, **nowhere(tmp_path))
    assert len(report.of("amd")) == 4 and report.vendor == "amd"
    assert (report.rocm_version, report.rocm_home, report.driver_version) == ("6.2.0", str(rocm), "6.7.0")
    assert [Path(c[0]).name for c in runner.calls] == ["amd-smi"]  # the version file spared hipconfig


def test_a_failing_amd_smi_falls_back_to_rocm_smi_and_keeps_both_reasons(tmp_path: Path) -> None:
    runner = Replay({("amd-smi", "static"): (1, "AMD SMI could not be initialized\n"),
                     ("rocm-smi", "--showproductname"): (0, sample("rocm-smi-rx7900xt.json"))})
    env = {"PATH": str(tools(tmp_path / "bin", "amd-smi", "rocm-smi"))}
    assert detect_gpus(runner, env, **nowhere(tmp_path)).of("amd")[0].name == "Radeon RX 7900 XT"
    runner.answers[("rocm-smi", "--showproductname")] = (0, "====== ROCm System Management Interface ======\n")
    report = detect_gpus(runner, env, **nowhere(tmp_path))
    assert report.of("amd") == ()
    assert "amd-smi static --json` exited with status 1" in report.amd_reason
    assert "rocm-smi printed something unexpected" in report.amd_reason


def test_rocm_without_a_version_file_is_told_by_hipconfig(tmp_path: Path) -> None:
    runner = Replay({("hipconfig", "--version"): (0, sample("hipconfig-version.txt"))})
    report = detect_gpus(runner, {"PATH": str(tools(tmp_path / "bin", "hipconfig"))}, **nowhere(tmp_path))
    assert report.rocm_version == "6.2" and report.rocm_reason == ""


def test_a_cuda_home_without_nvcc_is_reported_not_bypassed(tmp_path: Path) -> None:
    env = {"PATH": str(tools(tmp_path / "bin", "nvcc")), "CUDA_HOME": str(tmp_path / "empty")}
    report = detect_gpus(Replay(H100), env, **nowhere(tmp_path))
    assert report.cuda_version == ""
    assert report.cuda_reason == f"$CUDA_HOME is {tmp_path / 'empty'}, which has no bin/nvcc"


def test_nvcc_in_the_default_cuda_folder_is_found_and_names_the_home(tmp_path: Path) -> None:
    cuda = tmp_path / "cuda-12"
    tools(cuda / "bin", "nvcc")
    (cuda / "include").mkdir()
    (cuda / "include" / "cuda_runtime.h").write_text("")
    report = detect_gpus(Replay(H100), {"PATH": str(tools(tmp_path / "bin"))}, cuda_default=str(cuda),
                         rocm_default=str(tmp_path / "no-rocm"))
    assert (report.cuda_version, report.cuda_home, report.nvcc) == ("13.0", str(cuda), str(cuda / "bin" / "nvcc"))


def test_visible_gpus_follow_the_visible_devices_variables_like_the_runtimes() -> None:
    gpus = parse_nvidia_smi_csv(sample("nvidia-smi-query-h100x8.csv"))
    amd = parse_amd_smi_static(sample("amd-smi-static-mi300x.json"))
    assert visible_gpu_count(gpus, {}) == 8
    assert visible_gpu_count(gpus, {"CUDA_VISIBLE_DEVICES": "0,3"}) == 2
    assert visible_gpu_count(gpus, {"CUDA_VISIBLE_DEVICES": "GPU-7c3cadbd,5"}) == 2  # a UUID prefix names a GPU
    assert visible_gpu_count(gpus, {"CUDA_VISIBLE_DEVICES": "1,9,2"}) == 1  # the list ends at an unknown entry
    assert visible_gpu_count(gpus, {"CUDA_VISIBLE_DEVICES": ""}) == 0
    assert visible_gpu_count(gpus, {"CUDA_VISIBLE_DEVICES": "-1"}) == 0
    assert visible_gpu_count(amd, {"ROCR_VISIBLE_DEVICES": "0,1,2", "HIP_VISIBLE_DEVICES": "1,2"}) == 2


def test_a_report_survives_the_trip_through_recipe_outputs(tmp_path: Path) -> None:
    report = detect_gpus(Replay(H100), {"PATH": str(tools(tmp_path / "bin", "nvidia-smi", "nvcc"))},
                         **nowhere(tmp_path))
    outputs = json.loads(json.dumps(report.to_outputs()))
    assert outputs["gpu_count"] == 8 and outputs["gpu_vendor"] == "nvidia"
    assert outputs["gpus"][0]["uuid"] == "GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1"
    assert GpuReport.from_outputs(outputs) == report


def test_the_vendor_of_a_host_with_both_kinds_is_mixed() -> None:
    both = GpuReport(gpus=(Gpu("nvidia", 0, "H100", 1), Gpu("amd", 0, "MI300X", 1)))
    assert (both.vendor, GpuReport().vendor) == ("mixed", "none")


def test_real_detection_on_this_machine_does_not_crash_and_explains_each_missing_vendor() -> None:
    report = detect_gpus(subprocess_runner(timeout=60))
    for vendor, reason in (("nvidia", report.nvidia_reason), ("amd", report.amd_reason)):
        assert bool(report.of(vendor)) != bool(reason)
    if not any(shutil.which(t) for t in ("nvidia-smi", "amd-smi", "rocm-smi")) and not Path("/opt/rocm/bin").exists():
        assert report.gpus == () and report.vendor == "none"  # the test machine: no GPU, no vendor tool
    assert bool(report.cuda_version) != bool(report.cuda_reason)
    assert bool(report.rocm_version) != bool(report.rocm_reason)


def test_the_subprocess_runner_reports_a_timeout_as_killed(tmp_path: Path) -> None:
    done = subprocess_runner(timeout=0.2)(["sleep", "5"])
    assert done.returncode == -9


# --- requirements: what get-cuda and get-rocm check ----------------------------------------

def h100_report(tmp_path: Path) -> GpuReport:
    return detect_gpus(Replay(H100), {"PATH": str(tools(tmp_path / "bin", "nvidia-smi", "nvcc"))}, **nowhere(tmp_path))


def test_a_toolkit_within_the_bounds_is_returned_with_its_details(tmp_path: Path) -> None:
    found = require_cuda_toolkit(h100_report(tmp_path), "12.0", "13.0")
    outputs = found.to_outputs()
    assert (outputs["version"], outputs["nvcc_version"], outputs["gpus"], outputs["driver_cuda_version"]) == (
        "13.0", "13.0.88", 8, "12.7")


def test_no_toolkit_fails_with_what_to_install_and_where_to_read_how() -> None:
    report = GpuReport(cuda_reason="nvcc is not on PATH, not in /usr/local/cuda/bin, and CUDA_HOME is not set")
    with pytest.raises(StepError) as caught:
        require_cuda_toolkit(report)
    assert caught.value.message == "no CUDA toolkit found: " + report.cuda_reason
    assert "CUDA Installation Guide for Linux" in caught.value.hint
    assert "https://docs.nvidia.com/cuda/" in caught.value.hint
    assert "never installs" in caught.value.hint


def test_a_toolkit_out_of_range_fails_with_found_and_wanted(tmp_path: Path) -> None:
    with pytest.raises(StepError) as caught:
        require_cuda_toolkit(h100_report(tmp_path), "99.0")
    assert caught.value.message == f"found CUDA 13.0 (nvcc {tmp_path / 'bin' / 'nvcc'}), wanted >= 99.0"
    assert "CUDA_HOME" in caught.value.hint


def test_the_driver_part_checks_the_cuda_version_the_driver_supports(tmp_path: Path) -> None:
    report = h100_report(tmp_path)
    assert require_cuda_driver(report, "12.4").version == "12.7"
    with pytest.raises(StepError, match=r"driver 565\.57\.01 supporting CUDA 12\.7, wanted CUDA <= 12\.4"):
        require_cuda_driver(report, None, "12.4")
    with pytest.raises(StepError, match="no NVIDIA GPU found: nvidia-smi is not on PATH") as caught:
        require_cuda_driver(GpuReport(nvidia_reason="nvidia-smi is not on PATH"))
    assert "Driver Installation Guide" in caught.value.hint


def test_a_toolkit_of_a_newer_cuda_major_than_the_driver_is_warned_about(tmp_path: Path) -> None:
    report = h100_report(tmp_path)  # nvcc 13.0, driver supporting CUDA 12.7
    assert toolkit_newer_than_driver(report).startswith(
        "the CUDA toolkit is 13.0 but the NVIDIA driver 565.57.01 supports CUDA 12.7 at most")
    older = GpuReport(cuda_version="11.1", cuda_driver_version="12.7")
    minor_ahead = GpuReport(cuda_version="12.8", cuda_driver_version="12.7")  # minor-version compatibility
    assert toolkit_newer_than_driver(older) == toolkit_newer_than_driver(minor_ahead) == ""
    assert toolkit_newer_than_driver(GpuReport(cuda_version="13.0")) == ""  # no driver: nothing to compare


def test_rocm_is_checked_against_the_bounds_with_install_guidance() -> None:
    report = GpuReport(gpus=tuple(parse_amd_smi_static(sample("amd-smi-static-mi300x.json"))),
                       rocm_version="6.2.0", rocm_home="/opt/rocm")
    assert require_rocm(report, "6.0", "6.2").to_outputs() == {
        "version": "6.2.0", "home": "/opt/rocm", "gpus": 4, "driver_version": "6.7.0", "amd_reason": ""}
    with pytest.raises(StepError, match=r"found ROCm 6\.2\.0 \(/opt/rocm\), wanted >= 6\.3"):
        require_rocm(report, "6.3")
    with pytest.raises(StepError, match="no ROCm found") as caught:
        require_rocm(GpuReport(rocm_reason="/opt/rocm/.info/version does not exist"))
    assert "ROCm installation for Linux" in caught.value.hint and "ROCM_PATH" in caught.value.hint


def test_the_query_nvidia_smi_is_asked_matches_the_columns_the_parser_expects() -> None:
    from cmx.tools.gpu import NVIDIA_SMI_QUERY

    assert NVIDIA_SMI_QUERY[0] == "--query-gpu=" + ",".join(NVIDIA_FIELDS)
    header = sample("nvidia-smi-query-h100x8.csv").splitlines()[0]
    assert [c.split(" [")[0].strip() for c in header.split(",")] == list(NVIDIA_FIELDS)
