"""Inputs files (cmx/recipe/inputs_file.py) and `--inputs-file` on `cmx run` and `cmx plan`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cmx.recipe.inputs_file import InputsFileError, read_inputs_file, write_inputs_file
from tests.conftest import Home


def test_values_become_the_text_an_input_flag_would_carry(tmp_path: Path):
    path = tmp_path / "in.yaml"
    path.write_text("# tuned\ntarget_qps_server: 37.5\nrows: 8\nverbose: true\nlabel: hello\napp.n: 3\n")
    assert read_inputs_file(path) == {"target_qps_server": "37.5", "rows": "8", "verbose": "true",
                                      "label": "hello", "app.n": "3"}


@pytest.mark.parametrize("text, fragment", [
    ("- a\n- b\n", "a mapping of NAME: VALUE, not a list"),
    ("rows: [1, 2]\n", "rows: a list value"),
    ("rows: null\n", "rows: a null value"),
    ("rows: [1\n", "not YAML"),
])
def test_a_file_that_is_not_name_value_scalars_is_refused_with_its_path(tmp_path: Path, text: str, fragment: str):
    path = tmp_path / "in.yaml"
    path.write_text(text)
    with pytest.raises(InputsFileError) as err:
        read_inputs_file(path)
    assert fragment in err.value.message and str(path) in (err.value.where or "")


def test_a_missing_file_says_so(tmp_path: Path):
    with pytest.raises(InputsFileError) as err:
        read_inputs_file(tmp_path / "nope.yaml")
    assert "cannot read" in err.value.message


def test_writing_merges_into_the_file_and_keeps_other_names(tmp_path: Path):
    path = tmp_path / "tuned.yaml"
    write_inputs_file(path, {"target_qps_offline": 151.0}, ["first"])
    write_inputs_file(path, {"target_qps_server": 37.5}, ["second", "use: cmx run --inputs-file"])
    text = path.read_text()
    assert text.startswith("# second\n# use: cmx run --inputs-file\n")
    assert read_inputs_file(path) == {"target_qps_offline": "151.0", "target_qps_server": "37.5"}


def _echo_recipe(home: Home) -> None:
    home.recipe("echo", """
        name: echo
        summary: returns its inputs
        tags: [echo]
        inputs:
          n: {type: int, default: 1}
          qps: {type: float, default: null}
        outputs:
          n: {type: int}
          qps: {type: float}
        """, "def run(ctx):\n    return {'n': ctx.inputs['n'], 'qps': ctx.inputs['qps'] or 0.0}\n")


def test_run_and_plan_read_an_inputs_file_and_an_explicit_input_wins(home: Home):
    _echo_recipe(home)
    (home.root / "in.yaml").write_text("n: 4\nqps: 12.5\n")
    out = home.cmx_json("run", "echo", "--inputs-file", "in.yaml", "--input", "n=7")
    assert out["outputs"] == {"n": 7, "qps": 12.5}
    plan = home.cmx_json("plan", "echo", "--inputs-file", "in.yaml")
    assert plan["steps"][0]["inputs"] == {"n": 4, "qps": 12.5}


def test_a_bad_inputs_file_is_an_error_before_anything_runs(home: Home):
    _echo_recipe(home)
    (home.root / "in.yaml").write_text("n: [1]\n")
    proc = home.cmx("run", "echo", "--inputs-file", "in.yaml")
    assert proc.returncode == 1 and "n: a list value" in proc.stderr
    assert not (home.root / "runs").exists()
    assert json.loads(home.cmx("plan", "echo", "--json").stdout)["steps"][0]["inputs"]["n"] == 1
