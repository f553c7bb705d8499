"""`--input-env NAME=VARIABLE`, and the split of a command's inputs that keeps a URL's password off the command
lines and batch scripts of the processes cmx starts elsewhere (a container, a Slurm job)."""

from __future__ import annotations

import json
import subprocess

import pytest

from cmx.errors import InputError
from cmx.execute.input_env import by_environment, hide_in_argv, read
from tests.conftest import CMX, Home

URL = "https://alice:pw-Q7x@mirror.example/v1"

ECHO = """
    name: echo-url
    summary: says whether it was given the URL whole
    tags: [echo, url]
    inputs:
      url: {type: str, default: none}
      word: {type: str, default: hi}
    cache: false
    outputs:
      whole: {type: bool}
      word: {type: str}
    """
ECHO_PY = """
    def run(ctx):
        return {"whole": ctx.inputs["url"] == "https://alice:pw-Q7x@mirror.example/v1", "word": ctx.inputs["word"]}
    """


def test_a_value_with_url_credentials_goes_by_a_variable_named_for_its_input():
    split = by_environment([("word", "hi"), ("endpoint_url", URL), ("app-x.base", "https://tok@h/"),
                            ("app.x.base", "http://u:p@h/"), ("plain", "https://mirror.example/v1")])
    assert split.pairs == (("word", "hi"), ("plain", "https://mirror.example/v1"))
    assert split.by_variable == (("endpoint_url", "CMX_INPUT_ENDPOINT_URL"), ("app-x.base", "CMX_INPUT_APP_X_BASE"),
                                 ("app.x.base", "CMX_INPUT_APP_X_BASE_2"))  # a name taken: the next suffix
    assert split.environment == {"CMX_INPUT_ENDPOINT_URL": URL, "CMX_INPUT_APP_X_BASE": "https://tok@h/",
                                 "CMX_INPUT_APP_X_BASE_2": "http://u:p@h/"}
    arguments = split.arguments()
    assert arguments == ["--input", "word=hi", "--input", "plain=https://mirror.example/v1",
                         "--input-env", "endpoint_url=CMX_INPUT_ENDPOINT_URL",
                         "--input-env", "app-x.base=CMX_INPUT_APP_X_BASE",
                         "--input-env", "app.x.base=CMX_INPUT_APP_X_BASE_2"]
    assert not any("pw-Q7x" in a or "tok@" in a for a in arguments)


def test_a_command_line_keeps_its_order_and_loses_only_the_credentials():
    argv = ["run", "q _x", "-i", "word=hi", "--input", f"url={URL}", f"--input=b.url={URL}", "--json",
            "--input", "n=2"]
    out, split = hide_in_argv(argv)
    assert out == ["run", "q _x", "-i", "word=hi", "--input-env", "url=CMX_INPUT_URL",
                   "--input-env=b.url=CMX_INPUT_B_URL", "--json", "--input", "n=2"]
    assert split.environment == {"CMX_INPUT_URL": URL, "CMX_INPUT_B_URL": URL}
    plain = ["run", "q", "--input", "a=1"]
    assert hide_in_argv(plain) == (plain, by_environment([("a", "1")]))


def test_an_unset_variable_is_named_in_the_error():
    assert read({"url": "MIRROR"}, {"MIRROR": URL}) == {"url": URL}
    with pytest.raises(InputError) as err:
        read({"url": "MIRROR", "word": "W"}, {"W": "x"})
    assert err.value.message == "--input-env url=MIRROR: the environment variable is not set"
    assert "export it first" in (err.value.hint or "")


def cmx(home: Home, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CMX, *args], env={**home.env, **env}, cwd=home.root, capture_output=True, text=True,
                          timeout=120)


def test_run_reads_an_input_from_the_variable_and_records_only_its_name(home: Home):
    home.recipe("echo-url", ECHO, ECHO_PY)
    proc = cmx(home, "run", "echo url", "--input-env", "url=MIRROR", "--input", "word=yo", "--json", MIRROR=URL)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["outputs"] == {"whole": True, "word": "yo"}
    records = [p.read_text() for p in (home.root / "runs").rglob("*.json")]
    assert records and not any("pw-Q7x" in text for text in records)
    assert any("url=MIRROR" in text for text in records)  # the command line as typed: the variable's name
    # a value read from a variable may change: the next identical command line is not answered from a memo
    again = cmx(home, "run", "echo url", "--input-env", "url=MIRROR", "--input", "word=yo", "--json",
                MIRROR="https://mirror.example/v1")
    assert json.loads(again.stdout)["outputs"] == {"whole": False, "word": "yo"}


def test_input_env_without_its_variable_or_with_the_same_input_given_is_refused(home: Home):
    home.recipe("echo-url", ECHO, ECHO_PY)
    unset = cmx(home, "run", "echo url", "--input-env", "url=NOT_SET_HERE")
    assert unset.returncode == 1
    assert "error: --input-env url=NOT_SET_HERE: the environment variable is not set" in unset.stderr
    both = cmx(home, "plan", "echo url", "--input-env", "url=MIRROR", "--input", f"url={URL}", MIRROR=URL)
    assert both.returncode == 2 and "url is given with --input too; give each input once" in both.stderr
    assert "pw-Q7x" not in both.stderr
