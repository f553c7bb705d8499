"""cmx.tools.torchvision_cpu: which torchvision pairs with a torch, and the sitecustomize that lets torchvision without
its compiled ops import against a CPU torch. install() itself (pip, PyPI) runs in the qwen3-vl e2e app run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cmx.tools.torchvision_cpu import SITECUSTOMIZE, TorchvisionError, matching_version

# what torchvision's _meta_registrations does at import: register a fake kernel for an op its _C.so would define
FAKE_TORCHVISION = """
import torch
torch.library.register_fake("torchvision::nms")(lambda dets, scores, iou_threshold: dets.new_empty(0))
"""


def test_torchvision_releases_pair_with_torchs_minor_version():
    assert matching_version("2.13.0+cpu") == "0.28.0"
    assert matching_version("2.8.1") == "0.23.1"
    with pytest.raises(TorchvisionError, match=r"torch 1\.13\.1"):
        matching_version("1.13.1")


def _run(tmp_path: Path, path: list[Path], code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in path)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120, check=False)


def test_the_shim_defines_the_op_schemas_torchvisions_import_needs_and_runs_the_sitecustomize_it_shadows(
        tmp_path: Path):
    pytest.importorskip("torch")
    package, shim, other = tmp_path / "pkg", tmp_path / "shim", tmp_path / "other"
    for folder in (package / "torchvision", shim, other):
        folder.mkdir(parents=True)
    (package / "torchvision" / "__init__.py").write_text(FAKE_TORCHVISION)
    (shim / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (other / "sitecustomize.py").write_text("import os\nos.environ['SHADOWED_SITECUSTOMIZE_RAN'] = '1'\n")
    code = textwrap.dedent("""
        import os, sys
        assert 'torch' not in sys.modules, 'the shim imports torch only for torchvision'
        import torchvision, torch
        print(os.environ.get('SHADOWED_SITECUSTOMIZE_RAN'), hasattr(torch.ops.torchvision, 'qnms'))
    """)
    done = _run(tmp_path, [shim, package, other], code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1", "True"]
    without = _run(tmp_path, [package], "import torchvision")
    assert without.returncode != 0 and "torchvision::nms" in without.stderr  # what the shim is for
