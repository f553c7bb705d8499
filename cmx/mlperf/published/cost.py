"""What a result costs at a price per accelerator-hour the user gives (cmx knows no price and assumes none).

With P the price of one accelerator for one hour (of one CPU socket, for a CPU-only system) and R the
result per accelerator (Result / total_accelerators, in its units per second):

- cost per million tokens = P / (R x 3600) x 1,000,000, for a result in Tokens/s;
- cost per thousand samples (or queries) = P / (R x 3600) x 1,000, for one in Samples/s (Queries/s);
- serving N users at U tokens/s each needs ceil(N x U / R) accelerators, which cost
  ceil(N x U / R) x P an hour, or that / N per user-hour.

A result is a benchmark's best case (MLPerf's load, its latency limits); docs/results.md says what that
leaves out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class UnitCost:
    """The price of `per` units (1,000,000 tokens, 1,000 samples) at one accelerator's rate."""

    amount: float
    per: int
    unit: str  # "tokens", "samples", "queries"

    @property
    def label(self) -> str:
        return f"per {'million' if self.per == 1_000_000 else 'thousand'} {self.unit}"


@dataclass(frozen=True)
class UsersCost:
    """Serving `users` at `tokens_per_user` tokens/s each with accelerators that give `per_device` tokens/s."""

    users: int
    tokens_per_user: float
    devices: int
    per_hour: float
    per_user_hour: float


def unit_cost(per_device: float, units: str, price: float) -> UnitCost | None:
    """The cost of a million tokens (Tokens/s), or a thousand samples or queries; None for a latency, or no rate."""
    kind = {"Tokens/s": "tokens", "Samples/s": "samples", "Queries/s": "queries"}.get(units)
    if kind is None or per_device <= 0:
        return None
    per = 1_000_000 if kind == "tokens" else 1_000
    return UnitCost(amount=price / (per_device * SECONDS_PER_HOUR) * per, per=per, unit=kind)


def users_cost(per_device: float, units: str, price: float, users: int, tokens_per_user: float) -> UsersCost | None:
    """What serving `users` costs at `tokens_per_user` each; None unless the result is in Tokens/s."""
    if units != "Tokens/s" or per_device <= 0 or users <= 0 or tokens_per_user <= 0:
        return None
    devices = math.ceil(users * tokens_per_user / per_device)
    return UsersCost(users=users, tokens_per_user=tokens_per_user, devices=devices, per_hour=devices * price,
                     per_user_hour=devices * price / users)
