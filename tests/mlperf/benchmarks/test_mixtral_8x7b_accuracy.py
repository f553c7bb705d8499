"""mixtral-8x7b's metric against hand-computed cases: GSM8K extraction, MBXP harnesses in the sandbox, the result
dict."""

from __future__ import annotations

import struct
from pathlib import Path

import pandas as pd
import pytest

from cmx.mlperf.benchmarks.mixtral_8x7b import gsm8k
from cmx.mlperf.benchmarks.mixtral_8x7b.accuracy import evaluate
from cmx.mlperf.benchmarks.mixtral_8x7b.dataset import COLUMNS, load_mixtral
from cmx.mlperf.benchmarks.mixtral_8x7b.mbxp import (
    MbxpProblem,
    extract_solution,
    grade,
    program_source,
)
from cmx.mlperf.loadgen.accuracy_log import AccuracyError, AccuracyRecord
from cmx.mlperf.scoring.accuracy_txt import format_accuracy_txt, parse_accuracy_txt
from cmx.mlperf.scoring.sandbox import (
    LanguageUnavailable,
    Outcome,
    check_language,
    run_programs,
)

# --- GSM8K: evaluate-accuracy.py find_number / maybe_remove_comma / try_float -------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("So 3 + 4 = 7. The answer is 7.", "7"),                            # the delimiter, then "7." reads as 7
    ("The answer is 12 apples, not 15.", "12"),                         # first number after the delimiter
    # case-sensitive: "the answer is" is no delimiter
    ("The answer is 3. Then again, the answer is 5 or 6.", "3"),
    ("The answer is 3. The answer is 5 or 6.", "5"),                    # the *last* delimiter counts
    ("40 + 2 = 42. The answer is unknown.", "42"),                      # nothing after it: the last number overall
    ("The answer is unknown, but 40 + 2 = 42", "40"),                   # after it: its first number, not the last
    ("It costs $5,600 in total", "5600"),                              # thousands separators dropped
    ("A loss of -12.5 dollars", "-12.5"),
    ("about .5 of them", ".5"),
    ("digits 1,2,3", "123"),                                            # commas inside numbers, whatever they mean
    ("no number here", ""),
    ("Q: 5 apples\nA: 9", "9"),
    ("The answer is 8.\nQ: What is 2 + 2?\nA: The answer is 4.", "8"),  # cut at the next few-shot question
    ("20 - 30 = -10", "-10"),
])
def test_gsm8k_extracts_the_number_the_reference_extracts(text: str, expected: str) -> None:
    assert gsm8k.extract_answer(text) == expected


def test_gsm8k_compares_as_floats_and_counts_a_non_number_as_wrong() -> None:
    assert gsm8k.is_correct("The answer is 14,000.", "14000")
    assert gsm8k.is_correct("The answer is 3.0", "3")
    assert not gsm8k.is_correct("The answer is 3.01", "3")
    assert not gsm8k.is_correct("I cannot tell.", "0")
    assert not gsm8k.is_correct("The answer is 5", "5,000")  # a ground truth float() rejects never matches
    # 3 right of 4: 100.0 * 3 / 4, unrounded
    assert gsm8k.gsm8k_accuracy(["The answer is 1", "2", "x", "The answer is 4."], ["1", "2", "3", "4"]) == 75.0


# --- MBXP: evaluate_mbxp.py worker and mxeval's check_correctness_* ------------------------------

def test_solution_is_cut_at_the_closing_fence_and_unescaped() -> None:
    response = "def my\\_sum(a, b):\n    return a + b\n```\nThis adds them."
    assert extract_solution(response, "cpp") == "def my_sum(a, b):\n    return a + b\n"
    assert extract_solution("   \n  x = 1", "python") == "x = 1"  # python is lstripped, others not
    assert extract_solution("   \n  x = 1", "ruby") == "   \n  x = 1"


def test_go_and_scala_lose_what_mxeval_adds_back() -> None:
    go = ('package main\nimport (\n    "fmt"\n    "strings"\n)\nimport "os"\nfunc f() int { return 1 }\n'
          'func main() {\n}\n')
    # the single-line import pattern has no MULTILINE flag: only an import at the very start goes
    assert extract_solution(go, "go") == '\n\nimport "os"\nfunc f() int { return 1 }\n\n'
    assert extract_solution('import "os"\nfunc f() {}', "go") == "\nfunc f() {}"
    scala = "object Main extends App {\n  def f() = 1\n}"
    assert extract_solution(scala, "scala") == "\n  def f() = 1\n"


def test_python_program_is_solution_test_and_check_call() -> None:
    problem = MbxpProblem("python", "add", "def check(candidate):\n    assert candidate(1, 2) == 3\n",
                          "def add(a, b):\n    return a + b\n")
    source = program_source(problem)
    expected = repr("def add(a, b):\n    return a + b\n\ndef check(candidate):\n    assert candidate(1, 2) == 3\n"
                    "\ncheck(add)")
    assert expected in source
    # the other languages: prompt "" + solution + test, nothing between
    js = MbxpProblem("javascript", "add", "\nconsole.log(1);", "const add = (a, b) => a + b;\n```")
    assert program_source(js) == "const add = (a, b) => a + b;\n\nconsole.log(1);"


def _sandbox_or_skip(language: str) -> None:
    try:
        check_language(language)
    except LanguageUnavailable as exc:
        pytest.skip(str(exc))


def _python(entry: str, response: str, asserts: str) -> MbxpProblem:
    return MbxpProblem("python", entry, f"\n\ndef check(candidate):\n{asserts}", response)


def test_python_harness_passes_only_what_mxeval_passes() -> None:
    _sandbox_or_skip("python")
    right = _python("add", "def add(a, b):\n    return a + b\n```", "    assert candidate(2, 3) == 5\n")
    wrong = _python("add", "def add(a, b):\n    return a - b\n", "    assert candidate(2, 3) == 5\n")
    # exec'ed with empty globals: a __main__ guard does not run, and exit() is disabled, so this fails
    exits = _python("add", "import sys\nsys.exit(0)\n", "    assert candidate(2, 3) == 5\n")
    guarded = _python("add", "import os\ndef add(a, b):\n    os.getcwd()\n    return a + b\n",
                      "    assert candidate(2, 3) == 5\n")
    main_guard = _python("add", "def add(a, b):\n    return a + b\n"
                                "if __name__ == '__main__':\n    raise SystemExit(3)\n",
                         "    assert candidate(2, 3) == 5\n")
    result = grade([right, wrong, exits, guarded, main_guard], run_programs)
    assert result.statuses == ("passed", "failed", "failed", "failed", "passed")
    assert (result.passed, result.graded, result.score) == (2, 5, 40.0)


def test_code_that_runs_forever_times_out_and_fails() -> None:
    _sandbox_or_skip("python")
    from cmx.mlperf.scoring.sandbox import Limits

    spin = _python("f", "def f():\n    while True:\n        pass\n", "    assert candidate() == 1\n")
    # the reference's limit is 20 s; a short one here, the same path through the sandbox
    outcomes = run_programs([__import__("cmx.mlperf.scoring.sandbox", fromlist=["Program"]).Program(
        "python", program_source(spin))], Limits(seconds=1.5))
    assert outcomes[0].status == "timeout" and not outcomes[0].passed


def test_javascript_and_cpp_pass_on_exit_status_zero() -> None:
    for language in ("javascript", "cpp"):
        _sandbox_or_skip(language)
    js_ok = MbxpProblem("javascript", "add",
                        "\nconst assert = require('node:assert');\nassert.deepEqual(add(2, 3), 5);\n",
                        "const add = function (a, b) {\n  return a + b;\n};\n```\nDone")
    js_bad = MbxpProblem("javascript", "add",
                         "\nconst assert = require('node:assert');\nassert.deepEqual(add(2, 3), 6);\n",
                         "const add = function (a, b) {\n  return a + b;\n};\n")
    cpp_ok = MbxpProblem("cpp", "add", "\nint main() { return add(2, 3) == 5 ? 0 : 1; }\n",
                         "#include <cstdio>\nint add(int a, int b) { return a + b; }\n")
    cpp_broken = MbxpProblem("cpp", "add", "\nint main() { return 0; }\n", "int add(int a, int b) { return a + }\n")
    result = grade([js_ok, js_bad, cpp_ok, cpp_broken], run_programs)
    assert result.statuses == ("passed", "failed", "passed", "compile-error")
    assert dict(result.passed_by_language) == {"javascript": 1, "cpp": 1}


def test_languages_outside_the_six_are_left_out() -> None:
    calls: list = []

    def fake_run(programs, limits, *, workers):
        calls.append([p.language for p in programs])
        return [Outcome("passed", 0, "", "", 0.0) for _ in programs]

    go = MbxpProblem("go", "f", "", "func f() {}")
    py = MbxpProblem("python", "f", "def check(c):\n    pass\n", "def f():\n    pass\n")
    result = grade([go, py], fake_run)
    assert calls == [["python"]] and (result.passed, result.graded) == (1, 1)
    grade([py, MbxpProblem("typescript", "f", "", "")], fake_run)
    assert calls[-1] == ["python", "typescript"]


def test_a_missing_toolchain_is_a_refusal_not_a_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(LanguageUnavailable, match="ruby"):
        grade([MbxpProblem("ruby", "f", "", "def f; end")], run_programs)


# --- the whole metric ----------------------------------------------------------------------------

def _dataset(tmp_path: Path) -> Path:
    rows = [("OpenOrca", "flan.1", "The cat sat on the mat."), ("GSM8K", "train.1", "42"),
            ("MBXP", "python_add", "\n\ndef check(candidate):\n    assert candidate(1, 2) == 3\n"),
            ("GSM8K", "train.2", "7")]
    frame = pd.DataFrame({c: [None] * len(rows) for c in COLUMNS})
    frame["dataset"], frame["id"], frame["gt_output"] = [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]
    frame["input"] = ["<s> [INST] q [/INST]"] * len(rows)
    frame["tok_input"] = [[1, 1, 5]] * len(rows)
    frame["tok_input_len"] = [3] * len(rows)
    path = tmp_path / "mixtral.pkl"
    frame.to_pickle(path)
    return path


def _record(seq: int, idx: int, tokens: list[int]) -> AccuracyRecord:
    return AccuracyRecord(seq, idx, struct.pack(f"<{len(tokens)}i", *tokens))


def test_the_result_dict_is_the_references(tmp_path: Path) -> None:
    dataset = load_mixtral(_dataset(tmp_path))
    texts = {(1,): "The cat sat on the mat.", (2,): "6 x 7 = 42. The answer is 42.", (3,): "The answer is 8",
             (4, 5): "def add(a, b):\n    return a + b\n```\n"}
    records = [_record(0, 0, [1]), _record(1, 1, [2]), _record(2, 2, [4, 5]), _record(3, 3, [3]),
               _record(4, 1, [3])]  # a duplicate of sample 1: counted in gen_num only

    def fake_run(programs, limits, *, workers):
        assert limits.seconds == 20.0
        return [Outcome("passed", 0, "", "", 0.0) for _ in programs]

    result = evaluate(records, dataset, lambda ids: texts[tuple(ids)], fake_run)
    values = result.as_dict()
    assert list(values) == ["rouge1", "rouge2", "rougeL", "rougeLsum", "gsm8k", "mbxp", "gen_len", "gen_num",
                            "gen_tok_len", "tokens_per_sample"]
    assert values["rouge1"] == values["rougeL"] == 100.0
    assert values["gsm8k"] == 50.0          # 42 right, 8 for 7 wrong
    assert values["mbxp"] == 100.0
    assert values["gen_len"] == len("The cat sat on the mat.")
    assert (values["gen_num"], values["gen_tok_len"]) == (5, 5)   # 1 + 1 + 2 + 1 tokens of 4 unique samples
    assert values["tokens_per_sample"] == 1.0                    # round(5 / 5, 1): duplicates divide too
    parsed = parse_accuracy_txt(format_accuracy_txt(values, "0" * 64))
    assert (parsed["gsm8k"], parsed["mbxp"], parsed["tokens_per_sample"]) == (50.0, 100.0, 1.0)


def test_no_mbxp_sample_gives_zero_and_no_gsm8k_sample_leaves_the_key_out(tmp_path: Path) -> None:
    dataset = load_mixtral(_dataset(tmp_path))
    values = evaluate([_record(0, 0, [1, 2])], dataset, lambda ids: "The cat.", run_programs).as_dict()
    assert values["mbxp"] == 0 and "gsm8k" not in values
    with pytest.raises(AccuracyError, match="outside"):
        evaluate([_record(0, 9, [1])], dataset, lambda ids: "", run_programs)


def test_the_rounds_targets_and_token_window_are_enforced_on_accuracy_txt() -> None:
    from cmx.mlperf.rounds import load_round
    from cmx.mlperf.scoring.accuracy_txt import meets_targets

    targets = load_round("v6.0").benchmark("mixtral-8x7b").accuracy
    # the Results line of AMD's v5.1 accuracy.txt (inference_results_v5.1, closed/AMD/results/
    # 8xMI325X_2xEPYC_9575F_1/mixtral-8x7b/Offline/accuracy) passes; every shortfall is named; the window has two ends
    amd = ("{'rouge1': 45.2486, 'rouge2': 23.2045, 'rougeL': 30.2973, 'rougeLsum': 42.2756, 'gsm8k': 73.14, "
           "'mbxp': 59.9, 'gen_len': 4141846, 'gen_num': 15000, 'gen_tok_len': 2149681, 'tokens_per_sample': 143.3}")
    assert meets_targets(parse_accuracy_txt(f"\nResults\n\n{amd}\n\nhash={'a' * 64}\n"), targets) == []
    good = parse_accuracy_txt(f"\nResults\n\n{amd}\n")
    bad = {**good, "gsm8k": 72.9, "mbxp": 59.5, "tokens_per_sample": 160.5}
    assert meets_targets(parse_accuracy_txt(format_accuracy_txt(bad, "a" * 64)), targets) == [
        "GSM8K exact match (%) is 72.9, below the minimum 72.9234",
        "MBXP pass@1 (%) is 59.5, below the minimum 59.5584",
        "tokens per sample is 160.5, above the maximum 160.49"]
    low = {**good, "tokens_per_sample": 130.3}
    assert meets_targets(parse_accuracy_txt(format_accuracy_txt(low, "a" * 64)), targets) == [
        "tokens per sample is 130.3, below the minimum 130.356"]


# MBXP's JavaScript rows as mxeval's data has them (mbjsp_release_v1.2.jsonl, MBJSP/2, shortened): lodash is required
_JS_TEST = ('\nconst _ = require("lodash")\n\nfunction compare(object1, object2){\n'
            '    return _.isEqual(object1, object2)\n}\n\n'
            'var x0 = similarElements([3, 4, 5, 6], [5, 7, 4, 10]);\nif(!compare(x0, [4, 5])){\n    throw "Error"\n}\n')
_JS_ANSWER = ("function similarElements(testTup1, testTup2) {\n"
              "  return testTup1.filter(x => testTup2.includes(x)).sort();\n}"
              "\n```\nThis keeps the shared elements.")


def test_javascript_needing_lodash_is_probed_first_and_refused_when_node_cannot_load_it() -> None:
    seen: list = []

    def run_with(probe_status: str):
        def fake_run(programs, limits, *, workers):
            seen.append([p.source for p in programs])
            status = probe_status if programs[0].source.startswith('require("lodash")') else "passed"
            return [Outcome(status, 0 if status == "passed" else 1, "", "Error: Cannot find module 'lodash'", 0.0)
                    for _ in programs]
        return fake_run

    problem = MbxpProblem("javascript", "similarElements", _JS_TEST, _JS_ANSWER)
    assert grade([problem], run_with("passed")).score == 100.0 and len(seen) == 2  # the probe, then the program
    with pytest.raises(LanguageUnavailable, match=r"lodash.*Cannot find module 'lodash'"):
        grade([problem], run_with("failed"))
    assert len(seen) == 3  # nothing ran after the failed probe


def test_the_real_sandbox_grades_mbxp_javascript_only_where_lodash_loads() -> None:
    _sandbox_or_skip("javascript")
    problem = MbxpProblem("javascript", "similarElements", _JS_TEST, _JS_ANSWER)
    try:
        result = grade([problem], run_programs)
    except LanguageUnavailable as exc:
        assert "lodash" in str(exc)  # this machine's node cannot load lodash from a sandbox folder: refused, no 0
    else:
        assert result.statuses == ("passed",)
