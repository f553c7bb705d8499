"""The tiny end-to-end runs of the mixture-of-experts apps (mixtral-8x7b, deepseek-r1, gpt-oss-120b, qwen3-vl): rows of
test_app_benchmarks.py's table, checked as that file checks the dense models' rows, in a file of their own so
that make test's e2e pass (a file per worker) runs the two halves side by side.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Home, needs_vllm
from tests.mlperf.test_app_benchmarks import App, e2e_rows, run_and_check_the_tiny_app


@needs_vllm
@pytest.mark.e2e
@pytest.mark.parametrize("app", e2e_rows(moe=True), ids=str)
def test_the_tiny_moe_app_runs_and_packages_for_open(builtin: Home, tmp_path: Path, app: App):
    run_and_check_the_tiny_app(builtin, tmp_path, app)
