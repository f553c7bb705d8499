"""A compliant-shaped v6.0 closed submission tree, built in a test's folder from recorded real LoadGen logs.

tests/data/loadgen/compliant holds the logs of real mlcommons-loadgen 6.0.15 runs with the
round's settings (600 s, 24576 samples, the v6.0 seeds) driving tests/data/loadgen/tiny_sut.py
(see its README). Detail logs are stored gzipped and unpacked byte for byte here. What no LoadGen
run makes is written here, and says so: accuracy.txt (the round's reference ROUGE values, since
the tiny SUT's tokens score nothing, with the hash of the real full accuracy log), the system
description, measurements.json, README.md, src/ and calibration.md.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from cmx import __version__
from cmx.execute.lockfile import Lock, LockedSource, LockedStep
from cmx.mlperf.benchmarks.llama2_70b.accuracy import AccuracyResult
from cmx.mlperf.scoring.accuracy_txt import format_accuracy_txt
from cmx.recipe.load import load_recipe

COMPLIANT = Path(__file__).resolve().parent / "data" / "loadgen" / "compliant"
REPO_RECIPES = Path(__file__).resolve().parent.parent / "recipes"
SCENARIOS = ("Offline", "Server", "Interactive")
BENCHMARK = "llama2-70b-99"
SYSTEM = "box"
SUBMITTER = "cmx-test"

SYSTEM_JSON = {
    "division": "closed", "submitter": SUBMITTER, "status": "available", "system_name": "Test box (1x CPU)",
    "number_of_nodes": "1", "host_processor_model_name": "AMD EPYC 9575F", "host_processors_per_node": "2",
    "host_processor_core_count": "64", "host_memory_capacity": "1.5 TB", "host_storage_capacity": "4 TB",
    "host_storage_type": "NVMe SSD", "accelerators_per_node": "8",
    "accelerator_model_name": "AMD Instinct MI300X 192GB HBM3", "accelerator_memory_capacity": "192 GB",
    "framework": "vLLM 0.32.0, PyTorch 2.9.0", "operating_system": "Ubuntu 24.04 LTS", "system_type": "datacenter",
    "other_software_stack": "ROCm 6.4.1", "host_processor_frequency": "", "host_processor_caches": "",
    "host_memory_configuration": "24x 64GB DDR5", "host_processor_interconnect": "",
    "host_networking": "N/A", "host_networking_topology": "N/A", "accelerator_frequency": "",
    "accelerator_host_interconnect": "PCIe Gen5 x16", "accelerator_interconnect": "XGMI",
    "accelerator_interconnect_topology": "", "accelerator_memory_configuration": "HBM3",
    "accelerator_on-chip_memories": "", "cooling": "air", "hw_notes": "", "sw_notes": "",
    "host_network_card_count": "N/A", "system_type_detail": "N/A",
}
MEASUREMENTS = {"input_data_types": "int32", "retraining": "No",
                "starting_weights_filename": "meta-llama/Llama-2-70b-chat-hf", "weight_data_types": "bf16",
                "weight_transformations": "none"}
# the round's reference values: what a model meeting the closed targets would score
REFERENCE = AccuracyResult(rouge1=44.4312, rouge2=22.0352, rougeL=28.6162, rougeLsum=42.0, gen_len=7000000,
                           gen_num=24576, gen_tok_len=7236000, tokens_per_sample=294.45)


def result_dir(root: Path, scenario: str, *, division: str = "closed") -> Path:
    return root / division / SUBMITTER / "results" / SYSTEM / BENCHMARK / scenario


def build_tree(root: Path, *, division: str = "closed", scenarios: tuple[str, ...] = SCENARIOS) -> Path:
    """A v6.0 tree at `root` that cmx check finds nothing wrong with (closed: TEST06 and calibration.md too)."""
    sub = root / division / SUBMITTER
    _json(sub / "systems" / f"{SYSTEM}.json", {**SYSTEM_JSON, "division": division})
    _text(sub / "src" / "README.md", "The harness: cmx (see its repository at the commit that ran).\n")
    if division == "closed":
        _text(sub / "documentation" / "calibration.md", "No calibration or quantization: bf16 weights as published.\n")
    for scenario in scenarios:
        add_result(root, scenario, division=division)
    return root


def add_result(root: Path, scenario: str, *, division: str = "closed") -> Path:
    name = scenario.lower()
    folder = result_dir(root, scenario, division=division)
    perf, acc = COMPLIANT / f"{name}-perf", COMPLIANT / f"accuracy-{name}"
    _unpack(perf, folder / "performance" / "run_1")
    _unpack(acc, folder / "accuracy")
    shutil.copyfile(acc / "mlperf_log_accuracy.json", folder / "accuracy" / "mlperf_log_accuracy.json")
    digest = (acc / "mlperf_log_accuracy.json.sha256").read_text().strip()
    _text(folder / "accuracy" / "accuracy.txt", format_accuracy_txt(REFERENCE, digest))
    shutil.copyfile(perf / "user.conf", folder / "user.conf")
    _json(folder / "measurements.json", MEASUREMENTS)
    _text(folder / "README.md", f"# {BENCHMARK} {scenario}\n\nRecorded LoadGen logs of a tiny SUT, for tests.\n")
    if division == "closed":
        test06 = COMPLIANT / f"test06-{name}"
        (folder / "TEST06" / "accuracy").mkdir(parents=True)
        shutil.copyfile(test06 / "verify_accuracy.txt", folder / "TEST06" / "verify_accuracy.txt")
        shutil.copyfile(test06 / "mlperf_log_accuracy.json",
                        folder / "TEST06" / "accuracy" / "mlperf_log_accuracy.json")
    return folder


def _unpack(src: Path, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    with gzip.open(src / "mlperf_log_detail.txt.gz", "rb") as f, open(dest / "mlperf_log_detail.txt", "wb") as out:
        shutil.copyfileobj(f, out)
    shutil.copyfile(src / "mlperf_log_summary.txt", dest / "mlperf_log_summary.txt")


def _json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=4) + "\n", encoding="utf-8")


def _text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


# --- a cmx results tree (what `cmx run "app mlperf inference llama2"` writes), for the packager ------------

ORIGIN = {
    "command": ["cmx", "run", "app mlperf inference llama2 _rocm _all-scenarios", "--input", "system_name=box"],
    "cmx_version": __version__, "run_record": "/runs/20261123-120000-app-mlperf-inference-llama2/run.json",
    "system": {"os": "Ubuntu 24.04 LTS", "kernel": "6.8.0-45-generic", "arch": "x86_64",
               "cpu_model": "AMD EPYC 9575F 64-Core Processor", "cpus": 256, "sockets": 2, "cores_per_socket": 64,
               "memory_bytes": 1623497216000, "python": "3.12.3", "gpu_count": 8, "gpu_vendor": "amd",
               "gpus": [{"vendor": "amd", "index": i, "name": "AMD Instinct MI300X", "memory_mib": 196592}
                        for i in range(8)],
               "driver_version": "6.8.5", "cuda_version": "", "rocm_version": "6.4.1"},
    "software": {"vllm": "0.9.2", "torch": "2.7.0", "loadgen": "6.0.15", "rouge_score": "0.1.2"},
    "model": {"name": "meta-llama/Llama-2-70b-chat-hf", "revision": "e9149a12809580e8602995856f8098ce973d1080",
              "precision": "bf16", "dtype": "bfloat16", "is_tiny": False},
    "container": None, "python": "3.12.3",
}
# what a user's system file adds to detection for that box
USER_SYSTEM = {"status": "available", "system_name": "Supermicro AS-8125GS-TNMR2", "host_storage_capacity": "4 TB",
               "host_storage_type": "NVMe SSD", "host_memory_configuration": "24x 64GB DDR5-6000",
               "host_networking": "N/A", "host_networking_topology": "N/A", "host_network_card_count": "N/A",
               "accelerator_host_interconnect": "PCIe Gen5 x16", "accelerator_interconnect": "XGMI",
               "accelerator_memory_configuration": "HBM3", "cooling": "air"}


# the recipes the run's lock pins by default: the app (and, through it, the base it extends) and one dep
RAN = ("app-mlperf-inference-llama2", "detect-system")
RUN_RECORD = "20261123-120000-app-mlperf-inference-llama2"


def builtin_source(folder: Path = REPO_RECIPES) -> LockedSource:
    """The recipes of this checkout, as a run's lock records the builtin source (its commit left out: the tests
    that need one make a git repository)."""
    return LockedSource(name="builtin", kind="builtin", folder=str(folder), commit=None)


def write_lock(record: Path, ran: Sequence[tuple[LockedSource, Sequence[str]]],
               query: str = "app mlperf inference llama2 _rocm _all-scenarios") -> Path:
    """`<record>/cmx.lock` as `cmx run` leaves it beside run.json: a step per recipe of each source, pinned to the
    sha256 of its files as they are now in the source's folder."""
    steps = []
    for source, names in ran:
        for name in names:
            recipe, _ = load_recipe(Path(source.folder) / name, source.name)
            steps.append(LockedStep(id=name, recipe=name, digest=recipe.digest, source=source.name,
                                    source_commit=source.commit, variations=(), inputs={}, secrets=(), context={},
                                    key="0" * 64))
    lock = Lock(query=query, inputs={}, context={}, cmx_version=__version__, python=sys.executable, packages={},
                steps=tuple(steps), sources=tuple(source for source, _ in ran))
    return lock.write(record / "cmx.lock")


def cmx_results(root: Path, scenarios: tuple[str, ...] = SCENARIOS,
                ran: Sequence[tuple[LockedSource, Sequence[str]]] | None = None, **facts: object) -> Path:
    """`<root>/box/llama2-70b-99/<Scenario>/` as the app leaves it after performance, accuracy and TEST06, and the
    run's record beside `root` (`<root>/../runs/<run>/cmx.lock`) pinning the recipes `ran` (default: RAN, of this
    checkout)."""
    record = root.parent / "runs" / RUN_RECORD
    write_lock(record, ran if ran is not None else [(builtin_source(), RAN)])
    origin = {**ORIGIN, "run_record": str(record / "run.json")}
    for scenario in scenarios:
        name = scenario.lower()
        folder = root / SYSTEM / BENCHMARK / scenario
        _unpack(COMPLIANT / f"{name}-perf", folder / "performance" / "run_1")
        acc = COMPLIANT / f"accuracy-{name}"
        _unpack(acc, folder / "accuracy")
        log = folder / "accuracy" / "mlperf_log_accuracy.json"
        shutil.copyfile(acc / "mlperf_log_accuracy.json", log)  # stands in for the full log: 8 KiB of it
        from cmx.tools.fs import sha256_file

        _text(folder / "accuracy" / "accuracy.txt", format_accuracy_txt(REFERENCE, sha256_file(log)))
        test06 = COMPLIANT / f"test06-{name}"
        _unpack(test06, folder / "TEST06")
        for file in ("mlperf_log_accuracy.json", "verify_accuracy.txt"):
            shutil.copyfile(test06 / file, folder / "TEST06" / file)
        shutil.copyfile(COMPLIANT / f"{name}-perf" / "user.conf", folder / "user.conf")
        runs = [{"scenario": scenario, "mode": m, "folder": "", "validity": "VALID" if m == "performance" else None,
                 "tokens_per_second": 1000.0, "ttft_p99_ms": 10.0, "tpot_p99_ms": 1.0,
                 "rouge": REFERENCE.as_dict() if m == "accuracy" else None, "problems": []}
                for m in ("performance", "accuracy", "test06")]
        _json(folder / "cmx_run.json", {
            "round": "v6.0", "benchmark": BENCHMARK, "scenario": scenario, "system": SYSTEM, "device": "rocm",
            "short": False, "tiny": False, "rows": None, "max_tokens": 1024, "compliant": True,
            "noncompliance": [], "ok": True, "runs": runs, "engine": {"precision": "bf16"}, "origin": origin,
            **facts})
    return root
