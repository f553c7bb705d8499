"""The cost formulas of docs/results.md, at a price the user gives."""

from __future__ import annotations

import pytest

from cmx.mlperf.published.cost import unit_cost, users_cost


def test_a_million_tokens_cost_the_hours_one_accelerator_takes_to_make_them() -> None:
    # 1,000 tokens/s per accelerator: a million tokens take 1,000 s, at 3.60 an hour that is 1.00
    cost = unit_cost(1000.0, "Tokens/s", 3.60)
    assert cost is not None and cost.amount == pytest.approx(1.00)
    assert cost.label == "per million tokens"


def test_samples_and_queries_are_priced_per_thousand() -> None:
    cost = unit_cost(10.0, "Samples/s", 3.60)  # a thousand samples take 100 s
    assert cost is not None and (cost.amount, cost.label) == (pytest.approx(0.10), "per thousand samples")
    assert unit_cost(10.0, "Latency (ms)", 3.60) is None


def test_users_need_whole_accelerators_and_the_cost_per_user_hour_follows() -> None:
    # 100 users x 20 tokens/s = 2,000 tokens/s, at 1,500 per accelerator: 2 accelerators
    cost = users_cost(1500.0, "Tokens/s", 2.0, 100, 20.0)
    assert cost is not None
    assert (cost.devices, cost.per_hour, cost.per_user_hour) == (2, 4.0, pytest.approx(0.04))
    assert users_cost(1500.0, "Samples/s", 2.0, 100, 20.0) is None
