"""One real LoadGen test driven by hand, for the tests that build their SUT and QSL themselves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cmx.mlperf.loadgen.harness import log_settings


def run_test(lg: Any, sut: Any, qsl: Any, settings: Any, out: Path, audit: Path | None = None) -> None:
    """LoadGen's test of `sut` over `qsl` with `settings`, its logs in `out` (no trace; no audit.config unless `audit`
    names one); the SUT stopped and both freed afterwards, whatever happened."""
    sut.start()
    qsl.construct(lg)
    sut.construct()
    try:
        lg.StartTestWithLogSettings(sut.handle, qsl.handle, settings, log_settings(lg, out),
                                    str(audit or out / "no-audit.config"))
        assert sut.wait_idle(10)
    finally:
        sut.stop()
        sut.destroy()
        qsl.destroy(lg)
