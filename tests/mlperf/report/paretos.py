"""`cmx pareto` results folders for the report's tests: ParetoRecords with made-up figures, written by write_record.

A curve of five fixed-concurrency points (1 to 64) over four regions and an Offline point, as
`<results>/<system>/<benchmark>/pareto/cmx_pareto.json`. Throughput grows with concurrency and
tokens/s per user falls, except at concurrency 16, which is dominated (fewer tokens/s than 8 at less
interactivity): the envelope steps over it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from cmx.mlperf.pareto.record import (
    HIGH,
    LABEL,
    LOW,
    MEDIUM,
    OFFLINE,
    PARETO_DIR,
    ULTRA_LOW,
    AccuracyGate,
    ParetoRecord,
    Point,
    Probe,
    write_record,
)

SYSTEM, BENCHMARK = "my-box", "llama3.1-8b"
# concurrency, region, system tokens/s, tokens/s per user
STEPS = ((1, ULTRA_LOW, 95.0, 96.0), (4, LOW, 360.0, 91.0), (8, LOW, 690.0, 87.0), (16, MEDIUM, 650.0, 40.0),
         (64, HIGH, 2400.0, 38.0))
OFFLINE_TPS = 3100.0
PASSED = AccuracyGate(metrics={"rouge1": 38.9, "rougeL": 24.1}, shortfalls=(), samples=130, seconds=41.0)
FAILED = AccuracyGate(metrics={"rouge1": 20.3, "rougeL": 11.0}, shortfalls=("rouge1 20.3 is under the target 38.39",),
                      samples=130, seconds=40.0)


def point(concurrency: int, region: str, system_tps: float | None, tps_per_user: float | None, *,
          accuracy: AccuracyGate | None = None, window_s: float = 30.0) -> Point:
    tpot = 1000.0 / tps_per_user if tps_per_user else None
    return Point(concurrency=concurrency, region=region, role=OFFLINE if region == OFFLINE else "mandatory",
                 folder=OFFLINE if region == OFFLINE else f"r{concurrency}", system_tps=system_tps,
                 tps_per_user=tps_per_user, ttft_p90_ms=120.0 + concurrency, tpot_p90_ms=tpot,
                 system_tps_per_kw=None, issued=10 * concurrency + 20, completed=10 * concurrency + 20, failed=0,
                 output_tokens=int((system_tps or 0) * window_s), window_s=window_s, duration_s=window_s + 3.0,
                 min_duration_s=600.0 if region == ULTRA_LOW else 1200.0, whole_run_tps=system_tps,
                 accuracy=accuracy)


def curve(*, gate: AccuracyGate = PASSED, scale: float = 1.0, system: str = SYSTEM) -> ParetoRecord:
    """A short cmx-client curve; `gate` is the accuracy run at concurrency 64, `scale` multiplies every throughput."""
    steps = tuple(point(c, region, tps * scale, per_user * scale, accuracy=gate if c == 64 else None)
                  for c, region, tps, per_user in STEPS)
    offline = point(2048, OFFLINE, OFFLINE_TPS * scale, None)
    return ParetoRecord(benchmark=BENCHMARK, system=system, client="cmx", label=LABEL, short=True, c_min=1, c_max=64,
                        c_max_source="probes", regions={ULTRA_LOW: (1, 1), LOW: (2, 8), MEDIUM: (16, 32),
                                                        HIGH: (64, 64)},
                        points=(*steps, offline), probes=(Probe(8, 690.0, 11.5, 10.0), Probe(64, 2400.0, 26.3, 10.0),
                                                          Probe(128, 2410.0, 52.0, 10.0)),
                        problems=("each point ran 30 s: the rules ask 600 s (low_latency) or 1,200 s",),
                        command="cmx pareto 'app mlperf inference llama3.1-8b _short'", seconds=400.0)


def write_pareto(results: Path, record: ParetoRecord | None = None) -> Path:
    """`results` as `cmx pareto` leaves it; return `results`."""
    record = record or curve()
    write_record(record, results / record.system / record.benchmark / PARETO_DIR)
    return results


def with_power(record: ParetoRecord, kw: float) -> ParetoRecord:
    points = tuple(replace(p, system_tps_per_kw=None if p.system_tps is None else p.system_tps / kw)
                   for p in record.points)
    return replace(record, points=points, provisioned_kw=kw, power_file="system_power.yaml", power_method="nameplate")
