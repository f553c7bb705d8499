"""cmx.mlperf.loadgen.test06: the TEST06 audit config and the checks of run_verification.py, on real and made logs."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest

from cmx.mlperf.loadgen import test06
from cmx.mlperf.loadgen.accuracy_log import AccuracyLogError

# A real published llama2-70b-99 result (AMD, MLPerf Inference v6.0 sample tree); read, never copied.
SAMPLE = Path("/work/shared/mlperf-sample/closed/AMD/results/8xMI300X_2xEPYC_9575F/llama2-70b-99")
needs_sample = pytest.mark.skipif(not SAMPLE.is_dir(), reason="the MLPerf sample submission is not on this machine")

EOS = 2


def hex_tokens(tokens: list[int]) -> str:
    return struct.pack(f"<{len(tokens)}i", *tokens).hex().upper()  # as LoadGen logs int32 ids


def sample(seq_id: int, qsl_idx: int, tokens: list[int], *, token_count: int | None = -1,
           first: list[int] | None = None) -> dict:
    """A record as LoadGen writes it in Server: data, token_data (the first token) and token_count."""
    record: dict = {"seq_id": seq_id, "qsl_idx": qsl_idx, "data": hex_tokens(tokens)}
    record["token_data"] = hex_tokens(tokens[:1] if first is None else first)
    if token_count is not None:
        record["token_count"] = len(tokens) if token_count == -1 else token_count
    return record


def write_log(path: Path, records: list[dict]) -> Path:
    lines = ["{ " + ", ".join(f"{json.dumps(k)} : {json.dumps(v)}" for k, v in r.items()) + " }" for r in records]
    path.write_text("[\n" + ",\n".join(lines) + ("\n" if lines else "") + "]\n")
    return path


def good_records() -> list[dict]:
    return [sample(0, 10, [450, 4996, 13, EOS]), sample(1, 11, [1576, 29871, EOS]), sample(2, 12, [319, 526])]


def verify(tmp_path: Path, records: list[dict], scenario: str = "Server", **kwargs: int) -> test06.Test06Result:
    return test06.verify(write_log(tmp_path / "mlperf_log_accuracy.json", records), scenario, **kwargs)


def verdicts(result: test06.Test06Result) -> list[str]:
    return test06.format_verify_accuracy_txt(result).splitlines()


# --- the audit config ----------------------------------------------------------------------------

def test_audit_config_sets_what_compliance_test06_audit_config_sets() -> None:
    settings = dict(re.findall(r"^\*\.\*\.(\w+) = (\d+)$", test06.AUDIT_CONFIG_TEST06, re.MULTILINE))
    assert settings == {
        "mode": "2",
        "accuracy_log_rng_seed": "720381539243781796",
        "accuracy_log_sampling_target": "100",
        "min_query_count": "100",
        "min_duration": "0",
        "sample_concatenate_permutation": "0",
    }


def test_write_audit_config_puts_it_where_loadgen_looks(tmp_path: Path) -> None:
    path = test06.write_audit_config(tmp_path)
    assert path == tmp_path / "audit.config"
    assert path.read_text() == test06.AUDIT_CONFIG_TEST06


# --- the real published TEST06 logs --------------------------------------------------------------

@needs_sample
@pytest.mark.parametrize("scenario", ["Offline", "Server", "Interactive"])
def test_real_test06_logs_give_the_published_verify_accuracy_txt(scenario: str) -> None:
    result = test06.verify(SAMPLE / scenario / "TEST06" / "accuracy" / "mlperf_log_accuracy.json", scenario)
    published = (SAMPLE / scenario / "TEST06" / "verify_accuracy.txt").read_text()
    assert test06.format_verify_accuracy_txt(result).splitlines() == published.splitlines()
    assert test06.format_verify_accuracy_txt(result) == published
    assert result.passed and result.samples == 100 and result.problems == []
    assert test06.verify_accuracy_txt_passes(published)


# --- each check, on made logs --------------------------------------------------------------------

def test_a_clean_server_log_passes_every_check(tmp_path: Path) -> None:
    result = verify(tmp_path, good_records())
    assert verdicts(result) == ["First token check pass: True", "EOS check pass: True",
                                "Sample length check pass: True", "TEST06 verification complete"]


def test_offline_skips_the_first_token_check(tmp_path: Path) -> None:
    records = [{k: v for k, v in r.items() if k != "token_data"} for r in good_records()]  # Offline logs none
    result = verify(tmp_path, records, "Offline")
    assert result.first_token.passed is None and result.passed
    assert verdicts(result)[0] == "First token check pass: Skipped"


def test_a_second_trailing_eos_fails_the_eos_check(tmp_path: Path) -> None:
    result = verify(tmp_path, [*good_records(), sample(3, 13, [450, EOS, EOS])])
    assert verdicts(result) == ["First token check pass: True", "EOS check pass: False",
                                "Sample length check pass: True", "TEST06 verification failed"]
    assert result.eos.problems == (("sample qsl_idx 13 (seq_id 3) ends with 2 EOS tokens (2): at most one is "
                                    "allowed; stop generating at the first EOS"),)
    assert not result.passed


@pytest.mark.parametrize("tokens", [[450, EOS], [EOS], [EOS, EOS], [EOS, 450], []])
def test_one_trailing_eos_passes_and_position_zero_is_not_counted(tmp_path: Path, tokens: list[int]) -> None:
    # run_verification.py walks back while i > 0, so an output of exactly [EOS, EOS] passes
    assert verify(tmp_path, [sample(0, 0, tokens, first=tokens[:1])], "Offline").eos.passed


def test_the_eos_id_can_be_another_tokenizers(tmp_path: Path) -> None:
    records = [sample(0, 0, [7, 128009, 128009])]
    assert verify(tmp_path, records).eos.passed
    assert not verify(tmp_path, records, eos_token_id=128009).eos.passed


def test_a_token_count_that_differs_from_the_logged_tokens_fails_the_length_check(tmp_path: Path) -> None:
    result = verify(tmp_path, [*good_records(), sample(3, 13, [450, 13, EOS], token_count=4)])
    assert verdicts(result)[2:] == ["Sample length check pass: False", "TEST06 verification failed"]
    assert result.sample_length.problems == ("sample qsl_idx 13 (seq_id 3) reports token_count 4 but logs 3 tokens",)


def test_a_missing_token_count_fails_the_length_check(tmp_path: Path) -> None:
    result = verify(tmp_path, [sample(0, 0, [450, EOS], token_count=None)])
    assert result.sample_length.passed is False
    assert "pass n_tokens" in result.sample_length.problems[0]


def test_a_first_token_that_differs_from_the_output_fails_server_but_not_offline(tmp_path: Path) -> None:
    records = [*good_records(), sample(3, 13, [450, 13, EOS], first=[999])]
    server = verify(tmp_path, records, "Server")
    assert verdicts(server) == ["First token check pass: False", "EOS check pass: True",
                                "Sample length check pass: True", "TEST06 verification failed"]
    assert server.first_token.problems == (("sample qsl_idx 13 (seq_id 3): LoadGen recorded first token(s) "
                                            "[999], but the output starts with [450]"),)
    assert verify(tmp_path, records, "Interactive").first_token.passed is False
    assert verify(tmp_path, records, "Offline").passed


def test_a_missing_first_token_fails_server(tmp_path: Path) -> None:
    records = [{k: v for k, v in r.items() if k != "token_data"} for r in good_records()]
    result = verify(tmp_path, records, "Server")
    assert result.first_token.passed is False
    assert "FirstTokenComplete" in result.first_token.problems[0]


def test_every_record_of_a_repeated_sample_is_checked(tmp_path: Path) -> None:
    result = verify(tmp_path, [sample(0, 5, [450, EOS]), sample(1, 5, [450, EOS, EOS])])
    assert result.eos.passed is False and "seq_id 1" in result.eos.problems[0]


def test_every_failing_sample_is_named(tmp_path: Path) -> None:
    result = verify(tmp_path, [sample(0, 0, [1, EOS, EOS]), sample(1, 1, [3, EOS, EOS], token_count=9)])
    assert len(result.eos.problems) == 2 and len(result.problems) == 3


# --- what is refused -----------------------------------------------------------------------------

def test_a_log_with_no_records_is_an_error_not_a_pass(tmp_path: Path) -> None:
    with pytest.raises(AccuracyLogError, match="has no records") as err:
        verify(tmp_path, [])
    assert "audit.config" in err.value.hint


def test_an_unknown_scenario_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(test06.Test06Error, match="unknown scenario 'offline'") as err:
        verify(tmp_path, good_records(), "offline")
    assert "Offline" in err.value.hint


def test_the_checker_rejects_a_failed_verification() -> None:
    failed = "First token check pass: True\nEOS check pass: False\nSample length check pass: True\n"
    assert not test06.verify_accuracy_txt_passes(failed)
    assert not test06.verify_accuracy_txt_passes("First token check pass: True\nEOS check pass: True\n")
    assert test06.verify_accuracy_txt_passes("  First token check pass: Skipped \nEOS check pass: True\n"
                                             "Sample length check pass: True\n")
