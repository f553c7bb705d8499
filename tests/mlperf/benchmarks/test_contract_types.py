"""mypy checks a benchmark package against the Benchmark protocol: what whisper's first dataset got past it is refused.

Whisper's dataset once lacked a member the protocol named, and nothing said so until a run reached it: the parts
were "module:name" strings resolved to Any. Each part is now a typed method and each BENCHMARK is annotated as a
Benchmark, so mypy reads a package the way the project's lint does. Two generated packages, one mypy run: one
whose dataset lacks `reference`, whose prompt source lacks `prompt_ids` and which defines no `score`, and the same
package with those three written, which passes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO

mypy_api = pytest.importorskip("mypy.api")

PACKAGE = '''"""A generated benchmark."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cmx.mlperf.backends.base import Media
from cmx.mlperf.benchmarks.base import Benchmark, Dataset, Generation
from cmx.mlperf.benchmarks.kit.benchmark import BenchmarkDefaults
from cmx.mlperf.benchmarks.kit.dataset_facts import DatasetFacts
from cmx.mlperf.samples import MediaSource
from cmx.mlperf.scoring.external import ExternalScorer


class Clips:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __len__(self) -> int:
        return 1

    def limit(self, n: int) -> Clips:
        return self
{reference}

class ClipPrompts:
    def __len__(self) -> int:
        return 1

    def media(self, i: int) -> tuple[Media, ...]:
        return ()
{prompt_ids}

@dataclass(frozen=True)
class Clip(BenchmarkDefaults):
    family: str = "clip"
    names: tuple[str, ...] = ("clip",)
    loadgen_model: str = "clip"
    generation: Generation = Generation(max_tokens=8)

    def load_dataset(self, path: Path) -> Dataset:
        return Clips(path)

    def make_tiny_dataset(self, dest: Path, tokenizer_dir: Path, rows: int, seed: int = 0) -> Path:
        return dest

    def dataset_facts(self) -> DatasetFacts:
        return DatasetFacts(1)

    def prompt_source(self, dataset: Dataset, model_dir: Path) -> MediaSource:
        return ClipPrompts()
{score}

BENCHMARK: Benchmark = Clip()
'''
REFERENCE = '''
    def reference(self, i: int) -> str:
        return ""
'''
PROMPT_IDS = '''
    def prompt_ids(self, i: int) -> list[int]:
        return [1]
'''
SCORE = '''
    def score(self, accuracy_log: Path, dataset: Dataset, tokenizer_dir: Path, *,
              jobs: int = 1, scorer: ExternalScorer | None = None) -> Mapping[str, float | int]:
        return {}
'''


def write_package(root: Path, name: str, *, whole: bool) -> Path:
    package = root / name
    package.mkdir()
    parts = {"reference": REFERENCE, "prompt_ids": PROMPT_IDS, "score": SCORE}
    (package / "__init__.py").write_text(PACKAGE.format(**{k: v if whole else "" for k, v in parts.items()}),
                                         encoding="utf-8")
    return package


def test_mypy_refuses_a_benchmark_whose_dataset_and_prompts_lack_protocol_members(tmp_path: Path) -> None:
    lacking = write_package(tmp_path, "lacking", whole=False)
    whole = write_package(tmp_path, "whole", whole=True)
    out, err, _ = mypy_api.run(["--config-file", str(REPO / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"),
                                "--no-error-summary", "--show-error-codes", str(lacking), str(whole)])
    lines = out.splitlines()
    errors = [line.split(": error: ", 1)[1] for line in lines if ": error: " in line]
    assert not [line for line in lines if line.startswith(str(whole))], out + err  # the whole package passes
    assert 'Incompatible return value type (got "Clips", expected "Dataset")  [return-value]' in errors, out + err
    assert any("is missing following \"Dataset\" protocol member" in line for line in lines), out
    assert any(line.endswith(": note:     reference") for line in lines), out
    assert 'Incompatible return value type (got "ClipPrompts", expected "MediaSource")  [return-value]' in errors
    assert any(line.endswith(": note:     prompt_ids") for line in lines), out
    assert 'Cannot instantiate abstract class "Clip" with abstract attribute "score"  [abstract]' in errors
    assert len(errors) == 3, out
