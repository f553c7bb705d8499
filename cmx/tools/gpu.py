"""GPUs and their software stacks, from the vendors' own tools: nvidia-smi and nvcc (NVIDIA);
amd-smi or rocm-smi, ROCm's version file and hipconfig (AMD).

Which programs list a kind's GPUs, where to look for them, and the variables that choose GPUs are
the kinds' (cmx.devices); this module holds a parser per listing program (PARSERS) and the
mechanics. Parsers take the tools' text, so tests feed them recorded output. `detect_gpus` takes a command
runner (in a recipe, one around `ctx.run_cmd`), so nothing here decides how a program runs. A
vendor whose tool is absent, fails or prints something unexpected is reported as "no GPU of that
vendor" with the reason, never as an exception.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cmx.devices import CUDA, KINDS, ROCM, DeviceKind
from cmx.devices.base import Detection
from cmx.devices.cuda import NVIDIA_SMI_FIELDS as NVIDIA_FIELDS
from cmx.errors import CmxError, StepError


def _detection(kind: DeviceKind) -> Detection:
    assert kind.detection is not None, f"the {kind.name} kind has no GPUs to detect"
    return kind.detection


NVIDIA, AMD = _detection(CUDA), _detection(ROCM)
# what nvidia-smi is asked (the kind's), with a header so a parse checks it reads the columns it asked for
NVIDIA_SMI_QUERY = NVIDIA.tools[0].args

_MIB = 1 << 20
_NA = {"", "n/a", "[n/a]", "not supported", "[not supported]", "unknown"}


class CommandResult(Protocol):
    """What a runner returns: a subprocess.CompletedProcess or anything shaped like one."""

    @property
    def returncode(self) -> int: ...

    @property
    def stdout(self) -> str: ...


# Runs argv and returns its exit status and output (stdout and stderr together). May raise
# OSError (or a CmxError, as ctx.run_cmd does) when the program cannot be started.
Runner = Callable[[Sequence[str]], CommandResult]


@dataclass(frozen=True)
class Gpu:
    vendor: str  # "nvidia" or "amd"
    index: int
    name: str
    memory_mib: int  # 0 when the tool does not say
    driver: str = ""
    bus_id: str = ""
    uuid: str = ""


@dataclass(frozen=True)
class NvccVersion:
    release: str  # "12.4", what CUDA versions are called
    build: str  # "12.4.131", nvcc's own V-number


@dataclass(frozen=True)
class GpuReport:
    """What detection found. A `*_reason` says why a part is missing ("" when it was found)."""

    gpus: tuple[Gpu, ...] = ()
    nvidia_reason: str = ""
    amd_reason: str = ""
    driver_version: str = ""  # the NVIDIA driver, or amdgpu's when only AMD GPUs are present
    cuda_version: str = ""  # the CUDA toolkit (nvcc) release, "12.4"
    nvcc_version: str = ""  # "12.4.131"
    nvcc: str = ""
    cuda_home: str = ""
    cuda_reason: str = ""
    cuda_driver_version: str = ""  # the newest CUDA the NVIDIA driver supports ("CUDA Version" of nvidia-smi)
    rocm_version: str = ""
    rocm_home: str = ""
    rocm_reason: str = ""
    gpus_visible: int = 0

    def of(self, vendor: str) -> tuple[Gpu, ...]:
        return tuple(g for g in self.gpus if g.vendor == vendor)

    @property
    def vendor(self) -> str:
        """"nvidia", "amd", "none", or "mixed" on the rare host with both."""
        vendors = {g.vendor for g in self.gpus}
        return vendors.pop() if len(vendors) == 1 else ("mixed" if vendors else "none")

    def to_outputs(self) -> dict[str, Any]:
        """The recipe outputs: JSON values only."""
        out = asdict(self)
        out["gpus"] = [asdict(g) for g in self.gpus]
        out["gpu_count"] = len(self.gpus)
        out["gpu_vendor"] = self.vendor
        return out

    @classmethod
    def from_outputs(cls, outputs: Mapping[str, Any]) -> GpuReport:
        """Back from `to_outputs()` (a dep's outputs as a recipe reads them)."""
        names = {f for f in cls.__dataclass_fields__ if f != "gpus"}
        values = {k: v for k, v in outputs.items() if k in names}
        return cls(gpus=tuple(Gpu(**g) for g in outputs.get("gpus", [])), **values)


# --- parsers: text in, values out; ValueError when the text is not what the tool prints -------------

def parse_nvidia_smi_csv(text: str) -> list[Gpu]:
    """Rows of `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`.

    With a header, columns are found by name (units in brackets are dropped); without one they
    are taken to be NVIDIA_FIELDS in order. "[N/A]" reads as empty.
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    first = [_column_name(c) for c in lines[0].split(",")]
    has_header = first[0] in NVIDIA_FIELDS or first[0] in {"gpu_name", "gpu_uuid", "gpu_bus_id"}
    columns = first if has_header else list(NVIDIA_FIELDS)
    columns = [{"gpu_name": "name", "gpu_uuid": "uuid", "gpu_bus_id": "pci.bus_id"}.get(c, c) for c in columns]
    if "name" not in columns:
        raise ValueError(f"no 'name' column in {lines[0]!r}")
    gpus = []
    for position, line in enumerate(lines[1:] if has_header else lines):
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(columns):
            raise ValueError(f"{line!r} has {len(cells)} fields, expected {len(columns)} ({', '.join(columns)})")
        row = {c: ("" if v.lower() in _NA else v) for c, v in zip(columns, cells, strict=True)}
        if not row["name"]:
            raise ValueError(f"{line!r} has no GPU name")
        gpus.append(Gpu(vendor="nvidia", index=_int(row.get("index", ""), position), name=row["name"],
                        memory_mib=_leading_int(row.get("memory.total", "")), driver=row.get("driver_version", ""),
                        bus_id=row.get("pci.bus_id", ""), uuid=row.get("uuid", "")))
    return gpus


def parse_nvidia_smi_header(text: str) -> tuple[str, str]:
    """(driver version, CUDA version) from `nvidia-smi`'s banner or `nvidia-smi -q`; "" where absent.
    The CUDA version there is the newest the driver supports, not an installed toolkit."""
    driver = re.search(r"Driver Version\s*:\s*([0-9][\w.\-]*)", text)
    cuda = re.search(r"CUDA Version\s*:\s*(\d+\.\d+(?:\.\d+)?)", text)
    return (driver.group(1) if driver else "", cuda.group(1) if cuda else "")


def parse_nvcc_version(text: str) -> NvccVersion:
    """From `nvcc --version`: "Cuda compilation tools, release 12.4, V12.4.131"."""
    match = re.search(r"release (\d+\.\d+)(?:, V(\d+(?:\.\d+)+))?", text)
    if not match:
        raise ValueError("no 'release X.Y' in the output of nvcc --version")
    return NvccVersion(release=match.group(1), build=match.group(2) or match.group(1))


def parse_amd_smi_static(json_text: str) -> list[Gpu]:
    """`amd-smi static --json`: a list of GPUs (ROCm 6) or {"gpu_data": [...]} (ROCm 7)."""
    data = _load_json(json_text)
    if isinstance(data, dict) and isinstance(data.get("gpu_data"), list):
        data = data["gpu_data"]
    if not isinstance(data, list):
        raise ValueError("expected a JSON list of GPUs or an object with 'gpu_data'")
    gpus = []
    for position, entry in enumerate(data):
        if not isinstance(entry, dict) or "gpu" not in entry:
            raise ValueError(f"GPU entry {position} has no 'gpu' index")
        asic, board = _dict(entry.get("asic")), _dict(entry.get("board"))
        vram, driver, bus = _dict(entry.get("vram")), _dict(entry.get("driver")), _dict(entry.get("bus"))
        name = (_text(asic.get("market_name")) or _text(board.get("product_name"))
                or f"AMD GPU {_text(asic.get('device_id')) or '(no name)'}")
        gpus.append(Gpu(vendor="amd", index=_int(entry["gpu"], position), name=name,
                        memory_mib=_amd_smi_mib(vram.get("size", vram.get("vram_size"))),
                        driver=_text(driver.get("version")) or _text(driver.get("driver_version")),
                        bus_id=_text(bus.get("bdf"))))
    return gpus


def parse_rocm_smi(json_text: str) -> list[Gpu]:
    """`rocm-smi --showproductname --showmeminfo vram [--showbus --showuniqueid] --json`: an object
    with one "cardN" entry per GPU (key spellings vary across versions: "Card series"/"Card Series")."""
    data = _load_json(json_text)
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object of cards")
    driver = _text(_get(_dict(data.get("system")), "Driver version"))
    gpus = []
    for key, card in data.items():
        match = re.fullmatch(r"card(\d+)", key)
        if not match or not isinstance(card, dict):
            continue
        name = next((v for v in (_text(_get(card, k)) for k in ("Card Series", "Device Name", "Card Model",
                                                                  "Card SKU")) if v), "")
        total = _text(_get(card, "VRAM Total Memory (B)"))
        gpus.append(Gpu(vendor="amd", index=int(match.group(1)), name=name or f"AMD GPU {key}",
                        memory_mib=int(total) // _MIB if total.isdigit() else 0, driver=driver,
                        bus_id=_text(_get(card, "PCI Bus")), uuid=_text(_get(card, "Unique ID"))))
    return sorted(gpus, key=lambda g: g.index)


def parse_rocm_version_file(text: str) -> str:
    """ROCm's `.info/version` ("6.2.0-66": version-build) -> "6.2.0"."""
    match = re.match(r"\s*(\d+\.\d+(?:\.\d+)?)", text)
    if not match:
        raise ValueError(f"{text.strip()[:40]!r} is not a ROCm version")
    return match.group(1)


def parse_hipconfig_version(text: str) -> str:
    """`hipconfig --version` ("6.2.41133-dd7f95766") -> the ROCm release "6.2": HIP shares ROCm's
    major.minor, its third number is a build number, not ROCm's patch level."""
    match = re.search(r"(\d+)\.(\d+)\.\d+", text)
    if not match:
        raise ValueError(f"{text.strip()[:40]!r} is not a HIP version")
    return f"{match.group(1)}.{match.group(2)}"


# the parser of each listing program's output (which programs a kind runs is its own, cmx.devices)
PARSERS: Mapping[str, Callable[[str], list[Gpu]]] = {
    "nvidia-smi": parse_nvidia_smi_csv, "amd-smi": parse_amd_smi_static, "rocm-smi": parse_rocm_smi}


# --- versions --------------------------------------------------------------------------------

def parse_version(text: str) -> tuple[int, ...]:
    """"12.4" -> (12, 4); "6.2.0-66" -> (6, 2, 0); a build suffix after - or + is dropped."""
    match = re.fullmatch(r"\s*[vV]?(\d+(?:\.\d+)*)(?:[-+][\w.\-+]*)?\s*", text or "")
    if not match:
        raise ValueError(f"{text!r} is not a version (numbers and dots, like 12.4)")
    return tuple(int(p) for p in match.group(1).split("."))


def version_in_range(found: str, minimum: str | None = None, maximum: str | None = None) -> bool:
    """Whether `found` is within [minimum, maximum]. Each bound is compared at the precision it is
    written with: version_max "12.4" accepts 12.4.131 (write "12.4.0" to refuse it)."""
    have = parse_version(found)
    if minimum and _at(have, parse_version(minimum)) < parse_version(minimum):
        return False
    return not (maximum and _at(have, parse_version(maximum)) > parse_version(maximum))


def wanted(minimum: str | None, maximum: str | None) -> str:
    """">= 12.4", "<= 12.6", ">= 12.4 and <= 12.6" or "any version"."""
    parts = [f">= {minimum}" if minimum else "", f"<= {maximum}" if maximum else ""]
    return " and ".join(p for p in parts if p) or "any version"


def check_bounds(minimum: str | None, maximum: str | None) -> None:
    """Refuse bounds that are not versions, or a minimum above the maximum."""
    for label, value in (("version_min", minimum), ("version_max", maximum)):
        if value:
            try:
                parse_version(value)
            except ValueError:
                raise StepError(f"{label} {value!r} is not a version",
                                hint="write it as numbers and dots, like 12.4") from None
    if minimum and maximum and parse_version(minimum) > parse_version(maximum):
        raise StepError(f"version_min {minimum} is above version_max {maximum}", hint="swap or fix the two bounds")


def _at(version: tuple[int, ...], bound: tuple[int, ...]) -> tuple[int, ...]:
    return (version + (0,) * len(bound))[:len(bound)]


# --- detection -------------------------------------------------------------------------------

class _Unusable(Exception):
    """A tool is absent, failed, or printed something unexpected; the message says which."""


def subprocess_runner(timeout: float = 60) -> Runner:
    """A runner on subprocess.run, for use outside a step. A timeout reads as killed (-9)."""

    def run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, text=True, errors="replace", timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
            return subprocess.CompletedProcess(list(argv), -9, stdout=out)

    return run


def detect_gpus(run: Runner, environ: Mapping[str, str] | None = None, *, cuda_default: str = NVIDIA.default_home,
                rocm_default: str = AMD.default_home) -> GpuReport:
    """GPUs of both vendors, the NVIDIA driver and CUDA toolkit, and the ROCm release.

    Programs are looked up on environ's PATH, then (AMD tools, nvcc) in the ROCm or CUDA folder.
    $CUDA_HOME (or $CUDA_PATH) and $ROCM_PATH, when set, name that folder; unset, the defaults are
    used. A program that is not found is not run.
    """
    env = dict(os.environ if environ is None else environ)
    nvidia, nvidia_reason, driver, cuda_driver = _detect_nvidia(run, env)
    rocm_home = _home(AMD, env) or rocm_default
    amd, amd_reason, _ = _list_gpus(AMD, run, env, rocm_home)
    nvcc_path, cuda_home, nvcc, cuda_reason = _detect_nvcc(run, env, cuda_default)
    rocm_version, rocm_reason = _detect_rocm(run, env, rocm_home)
    gpus = tuple(nvidia + amd)
    if not driver and amd:
        driver = amd[0].driver
    return GpuReport(gpus=gpus, nvidia_reason=nvidia_reason, amd_reason=amd_reason, driver_version=driver,
                     cuda_version=nvcc.release if nvcc else "", nvcc_version=nvcc.build if nvcc else "",
                     nvcc=nvcc_path, cuda_home=cuda_home, cuda_reason=cuda_reason, cuda_driver_version=cuda_driver,
                     rocm_version=rocm_version, rocm_home=rocm_home if rocm_version else "", rocm_reason=rocm_reason,
                     gpus_visible=visible_gpu_count(gpus, env))


def _home(detection: Detection, env: Mapping[str, str]) -> str:
    """The stack's folder as the first of its variables that is set names it ("" when none is)."""
    return next((env[v] for v in detection.home_variables if env.get(v)), "")


def _list_gpus(detection: Detection, run: Runner, env: Mapping[str, str], home: str) -> tuple[list[Gpu], str, str]:
    """The GPUs the first of a kind's listing tools that works reports, why there are none, and that tool's path."""
    dirs = [Path(home) / d for d in detection.tool_dirs]
    tried = []
    for tool in detection.tools:
        path = _which(tool.program, env, *dirs)
        if not path:
            continue
        try:
            gpus = _parsed(run, [path, *tool.args], PARSERS[tool.program])
        except _Unusable as exc:
            tried.append(str(exc))
            continue
        return (gpus, "", path) if gpus else ([], f"{tool.program} lists no GPU", path)
    if tried:
        return [], "; ".join(tried), ""
    names = [t.program for t in detection.tools]
    where = "on PATH" + "".join(f" or in {d}" for d in dirs)
    return [], f"{names[0]} is not {where}" if len(names) == 1 else f"neither {' nor '.join(names)} is {where}", ""


def _detect_nvidia(run: Runner, env: Mapping[str, str]) -> tuple[list[Gpu], str, str, str]:
    gpus, reason, smi = _list_gpus(NVIDIA, run, env, "")
    if not gpus:
        return [], reason, "", ""
    try:  # the banner is the only place nvidia-smi states the CUDA version the driver supports
        driver, cuda = _parsed(run, [smi], parse_nvidia_smi_header)
    except _Unusable:
        driver, cuda = "", ""
    return gpus, "", gpus[0].driver or driver, cuda


def _detect_nvcc(run: Runner, env: Mapping[str, str], cuda_default: str) -> tuple[str, str, NvccVersion | None, str]:
    """(nvcc path, CUDA home, version, reason). A CUDA_HOME that is set is the only place looked at:
    falling back elsewhere would silently use a toolkit the user did not choose."""
    for var in NVIDIA.home_variables:
        if env.get(var):
            home = env[var]
            path = _executable(Path(home) / "bin" / "nvcc")
            if not path:
                return "", "", None, f"${var} is {home}, which has no bin/nvcc"
            break
    else:
        path = _which("nvcc", env) or _executable(Path(cuda_default) / "bin" / "nvcc")
        if not path:
            return "", "", None, (f"nvcc is not on PATH, not in {Path(cuda_default) / 'bin'}, and "
                                  f"{NVIDIA.home_variables[0]} is not set")
        home = _toolkit_home(path)
    try:
        return path, home, _parsed(run, [path, "--version"], parse_nvcc_version), ""
    except _Unusable as exc:
        return path, home, None, str(exc)


def _detect_rocm(run: Runner, env: Mapping[str, str], rocm_home: str) -> tuple[str, str]:
    version_file = Path(rocm_home) / ".info" / "version"
    try:
        return parse_rocm_version_file(version_file.read_text(encoding="utf-8", errors="replace")), ""
    except OSError:
        pass
    except ValueError as exc:
        return "", f"{version_file}: {exc}"
    dirs = [Path(rocm_home) / d for d in AMD.tool_dirs]
    hipconfig = _which("hipconfig", env, *dirs)
    if not hipconfig:  # ROCm 7 images may lack .info/version; hipconfig still says the release
        return "", f"{version_file} does not exist and hipconfig is not on PATH" + "".join(f" or in {d}" for d in dirs)
    try:
        return _parsed(run, [hipconfig, "--version"], parse_hipconfig_version), ""
    except _Unusable as exc:
        return "", str(exc)


def visible_gpu_count(gpus: Sequence[Gpu], environ: Mapping[str, str]) -> int:
    """How many GPUs a program started with this environment sees: each kind's runtime filters applied in turn
    to its vendor's GPUs (CUDA_VISIBLE_DEVICES for NVIDIA; ROCR_VISIBLE_DEVICES then HIP_VISIBLE_DEVICES for
    AMD), by index or UUID; like the runtimes, a list ends at the first entry that names no GPU."""
    count = 0
    for kind in KINDS.values():
        if kind.detection is None:
            continue
        seen = [g for g in gpus if g.vendor == kind.detection.vendor]
        for variable in kind.visibility.runtime_filters:
            seen = _select(seen, environ.get(variable))
        count += len(seen)
    return count


def _select(gpus: Sequence[Gpu], value: str | None) -> list[Gpu]:
    if value is None:
        return list(gpus)
    chosen: list[Gpu] = []
    for entry in (e.strip() for e in value.split(",")):
        match = (gpus[int(entry)] if entry.isdigit() and int(entry) < len(gpus)
                 else next((g for g in gpus if entry and g.uuid and g.uuid.startswith(entry)), None))
        if match is None or match in chosen:
            break
        chosen.append(match)
    return chosen


def _parsed(run: Runner, argv: list[str], parse: Callable[[str], Any]) -> Any:
    name = Path(argv[0]).name
    try:
        done = run(argv)
    except (OSError, CmxError) as exc:  # CmxError: ctx.run_cmd's "cannot start"
        raise _Unusable(f"{name} could not be started: {getattr(exc, 'message', None) or exc}") from None
    output = done.stdout or ""
    if done.returncode != 0:
        code = done.returncode
        how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
        said = _first_line(output)
        raise _Unusable(f"`{name} {' '.join(argv[1:])}` {how}" + (f": {said}" if said else ""))
    try:
        return parse(output)
    except (ValueError, KeyError, TypeError) as exc:
        raise _Unusable(f"{name} printed something unexpected ({exc}): {_first_line(output) or 'nothing'}") from None


def _which(name: str, env: Mapping[str, str], *extra: Path) -> str:
    found = shutil.which(name, path=env.get("PATH", os.defpath))
    if found:
        return found
    return next((p for p in (_executable(d / name) for d in extra) if p), "")


def _executable(path: Path) -> str:
    return str(path) if path.is_file() and os.access(path, os.X_OK) else ""


def _toolkit_home(nvcc: str) -> str:
    """The toolkit folder above bin/nvcc, or "" when nvcc is a wrapper elsewhere (no headers beside it)."""
    home = Path(os.path.realpath(nvcc)).parent.parent
    return str(home) if (home / "include" / "cuda_runtime.h").is_file() else ""


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:200]


def _load_json(text: str) -> Any:
    """The JSON document in a tool's output, skipping warning lines printed before it."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"^\s*[\[{]", text, re.MULTILINE):
        try:
            return decoder.raw_decode(text, match.end() - 1)[0]
        except json.JSONDecodeError:
            continue
    raise ValueError("no JSON document in the output")


def _column_name(header: str) -> str:
    return re.sub(r"\s*\[.*\]\s*$", "", header.strip()).lower()


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _leading_int(text: str) -> int:
    match = re.match(r"\s*(\d+)", text or "")
    return int(match.group(1)) if match else 0


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    text = "" if value is None else str(value).strip()
    return "" if text.lower() in _NA else text


def _get(mapping: Mapping[str, Any], key: str) -> Any:
    """A value by key, ignoring case (rocm-smi has spelled "Card Series" both ways)."""
    if key in mapping:
        return mapping[key]
    return next((v for k, v in mapping.items() if k.lower() == key.lower()), None)


def _amd_smi_mib(size: Any) -> int:
    """amd-smi's VRAM size: {"value": N, "unit": "MB"}, a bare number (MB), or "N MB"; its MB are MiB."""
    if isinstance(size, dict):
        value, unit = size.get("value"), str(size.get("unit", "MB"))
    elif isinstance(size, str):
        number = re.match(r"\s*(\d+)\s*([A-Za-z]*)", size)
        value, unit = (number.group(1), number.group(2) or "MB") if number else (None, "MB")
    else:
        value, unit = size, "MB"
    if not isinstance(value, (int, float, str)) or not str(value).isdigit():
        return 0
    scale = {"B": 1 / _MIB, "KB": 1 / 1024, "MB": 1, "GB": 1024, "TB": 1 << 20}.get(unit.upper().replace("I", ""), 1)
    return int(int(value) * scale)


# --- requirements (get-cuda, get-rocm) -------------------------------------------------------

@dataclass(frozen=True)
class Found:
    """A toolchain that meets a request: the recipe's outputs."""

    version: str
    home: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_outputs(self) -> dict[str, Any]:
        return {"version": self.version, "home": self.home, **self.details}


def _require(found: str, minimum: str | None, maximum: str | None, detection: Detection, stack: str, *,
             missing: str, missing_hint: str, found_as: str, wanted_as: str = "", fix: str = "") -> None:
    """Refuse bounds that are not versions, a version that was not `found` (`missing`), or one outside
    [minimum, maximum]; the hint then says to install `stack` within them (or what `fix` says), or to
    change the bounds."""
    check_bounds(minimum, maximum)
    if not found:
        raise StepError(missing, hint=missing_hint)
    if not version_in_range(found, minimum, maximum):
        fix = fix or (f"install {stack} {wanted(minimum, maximum)} (see {detection.install_docs}) and set "
                      f"{detection.home_variables[0]} to it")
        raise StepError(f"found {found_as}, wanted {wanted_as}{wanted(minimum, maximum)}",
                        hint=f"{fix}, or change version_min/version_max")


def require_cuda_toolkit(report: GpuReport, minimum: str | None = None, maximum: str | None = None) -> Found:
    """The CUDA toolkit (nvcc) detection found, within [minimum, maximum]; StepError otherwise."""
    _require(report.cuda_version, minimum, maximum, NVIDIA, "a CUDA Toolkit",
             found_as=f"CUDA {report.cuda_version} (nvcc {report.nvcc})",
             missing=f"no CUDA toolkit found: {report.cuda_reason or 'nvcc was not found'}",
             missing_hint=f"install the CUDA Toolkit (see {NVIDIA.install_docs}), then put its bin folder on PATH "
                          f"or set {NVIDIA.home_variables[0]} to it; cmx never installs drivers or toolkits")
    return Found(report.cuda_version, report.cuda_home, _cuda_details(report))


def require_cuda_driver(report: GpuReport, minimum: str | None = None, maximum: str | None = None) -> Found:
    """An NVIDIA driver with GPUs, supporting a CUDA version within [minimum, maximum]."""
    check_bounds(minimum, maximum)
    if not report.of(NVIDIA.vendor):
        raise StepError(f"no NVIDIA GPU found: {report.nvidia_reason}",
                        hint=f"install the NVIDIA driver (see {NVIDIA.driver_docs}) and check that `nvidia-smi` "
                             "lists the GPUs; cmx never installs drivers")
    _require(report.cuda_driver_version, minimum, maximum, NVIDIA, "an NVIDIA driver",
             missing="the NVIDIA driver did not say which CUDA version it supports (no 'CUDA Version' in the output "
                     "of nvidia-smi)",
             missing_hint="run `nvidia-smi` and read its first lines; reinstall the driver if they show no CUDA "
                          "version",
             found_as=f"an NVIDIA driver {report.driver_version} supporting CUDA {report.cuda_driver_version}",
             wanted_as="CUDA ", fix=f"a newer driver supports a newer CUDA: upgrade it (see {NVIDIA.driver_docs})")
    return Found(report.cuda_driver_version, report.cuda_home, _cuda_details(report))


def require_rocm(report: GpuReport, minimum: str | None = None, maximum: str | None = None) -> Found:
    """The ROCm release detection found, within [minimum, maximum]; StepError otherwise."""
    amd = report.of(AMD.vendor)
    reason = report.rocm_reason or "no ROCm version file or hipconfig"
    _require(report.rocm_version, minimum, maximum, AMD, "ROCm",
             found_as=f"ROCm {report.rocm_version} ({report.rocm_home})", missing=f"no ROCm found: {reason}",
             missing_hint=f"install ROCm (see {AMD.install_docs}); if it is installed elsewhere than "
                          f"{AMD.default_home}, set {AMD.home_variables[0]} to it; cmx never installs drivers or ROCm")
    return Found(report.rocm_version, report.rocm_home,
                 {"gpus": len(amd), "driver_version": amd[0].driver if amd else "", "amd_reason": report.amd_reason})


def toolkit_newer_than_driver(report: GpuReport) -> str:
    """A warning when the toolkit's CUDA major is newer than the driver supports ("" otherwise):
    programs built with it will not start there. Within one major, CUDA's minor-version
    compatibility lets them run, so that is not reported."""
    if not (report.cuda_version and report.cuda_driver_version):
        return ""
    if parse_version(report.cuda_version)[0] <= parse_version(report.cuda_driver_version)[0]:
        return ""
    return (f"the CUDA toolkit is {report.cuda_version} but the NVIDIA driver {report.driver_version} supports "
            f"CUDA {report.cuda_driver_version} at most: programs it builds will not run here until the driver "
            f"is upgraded (see {NVIDIA.driver_docs})")


def _cuda_details(report: GpuReport) -> dict[str, Any]:
    nvidia = report.of(NVIDIA.vendor)
    return {"toolkit_version": report.cuda_version, "nvcc_version": report.nvcc_version, "nvcc": report.nvcc,
            "driver_version": report.driver_version if nvidia else "",
            "driver_cuda_version": report.cuda_driver_version, "gpus": len(nvidia),
            "nvidia_reason": report.nvidia_reason}
