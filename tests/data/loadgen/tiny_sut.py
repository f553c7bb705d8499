"""A tiny SUT that drives real LoadGen in one process: one test per process, as FromConfig demands.

It answers every sample with int32 token ids (`--n-tokens`, 3 by default; 0 leaves n_tokens
out of the response, as a SUT that forgets it would). Server and Interactive runs send
FirstTokenComplete before the completion, after `--first-token-ms`; Offline runs complete
samples at `--rate` samples/s (0: at once). The user.conf is cmx's short profile
(`cmx.mlperf.loadgen.userconf`) unless `--user-conf` gives one; it is copied into the output folder
next to LoadGen's logs. Tests run it as a subprocess.

    python tests/data/loadgen/tiny_sut.py --scenario Offline --mode performance --rate 100 --out OUT
"""

from __future__ import annotations

import argparse
import array
import os
import queue
import shutil
import sys
import threading
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="folder for LoadGen's logs and the user.conf")
    p.add_argument("--round", default="v6.0")
    p.add_argument("--benchmark", default="llama2-70b-99")
    p.add_argument("--scenario", choices=("Offline", "Server", "Interactive"), required=True)
    p.add_argument("--mode", choices=("performance", "accuracy"), default="performance")
    p.add_argument("--samples", type=int, default=32, help="QSL size, and the short profile's sample count")
    p.add_argument("--target-qps", type=float, default=None, help="default: 100 Offline, 300 Server")
    p.add_argument("--min-duration-ms", type=int, default=2000)
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="extra user.conf key")
    p.add_argument("--user-conf", type=Path, default=None, help="use this user.conf instead of the short profile")
    p.add_argument("--n-tokens", type=int, default=3, help="tokens per answer; 0: leave n_tokens out")
    p.add_argument("--first-token-ms", type=float, default=0.0, help="Server: delay before the first token")
    p.add_argument("--slow-every", type=int, default=0, metavar="N",
                   help="Server: every Nth query waits --slow-first-token-ms for its first token (0: none)")
    p.add_argument("--slow-first-token-ms", type=float, default=0.0, help="Server: the slow queries' delay")
    p.add_argument("--rate", type=float, default=0.0, help="Offline: samples completed per second (0: at once)")
    p.add_argument("--from-config-twice", action="store_true", help="call FromConfig twice (LoadGen logs an error)")
    p.add_argument("--audit-test06", action="store_true", help="run with compliance TEST06's audit.config")
    return p.parse_args(argv)


def write_user_conf(args: argparse.Namespace) -> Path:
    target = args.out / "user.conf"
    if args.user_conf is not None:
        shutil.copyfile(args.user_conf, target)
        return target
    from cmx.mlperf.loadgen.userconf import ShortProfile, user_conf
    from cmx.mlperf.rounds import load_round

    qps = args.target_qps or (100.0 if args.scenario == "Offline" else 300.0)
    overrides = {}
    for item in args.override:
        key, _, value = item.partition("=")
        overrides[key.strip()] = float(value) if "." in value else int(value)
    profile = ShortProfile(min_duration_ms=args.min_duration_ms, samples=args.samples,
                           min_query_count=args.samples)
    conf = user_conf(load_round(args.round), args.benchmark, args.scenario, target_qps=qps,
                     short=profile, overrides=overrides)
    return conf.write(target)


class TinySUT:
    """Answers from prebuilt int32 token buffers (LoadGen copies them when it logs accuracy)."""

    def __init__(self, lg, samples: int, n_tokens: int, scenario: str, first_token_s: float, rate: float,
                 slow_every: int = 0, slow_s: float = 0.0) -> None:
        self.lg, self.n_tokens, self.scenario = lg, n_tokens, scenario
        self.first_token_s, self.rate = first_token_s, rate
        self.slow_every, self.slow_s, self.issued = slow_every, slow_s, 0
        count = max(n_tokens, 1)
        self.buffers = [array.array("i", [(i + j) % 32000 + 3 for j in range(count)]) for i in range(samples)]
        self.pending: queue.Queue = queue.Queue()
        self.worker = threading.Thread(target=self._work, daemon=True)
        self.worker.start()

    def response(self, query, first: bool = False):
        address, length = self.buffers[query.index].buffer_info()
        if first:
            return self.lg.QuerySampleResponse(query.id, address, 4)
        if self.n_tokens == 0:
            return self.lg.QuerySampleResponse(query.id, address, length * 4)
        return self.lg.QuerySampleResponse(query.id, address, length * 4, self.n_tokens)

    def issue(self, queries) -> None:
        self.issued += 1
        if self.scenario != "Offline" and self.slow_every and self.issued % self.slow_every == 0:
            # a timer of its own, so that the slow query holds up no other one
            threading.Timer(self.slow_s, self._answer, [list(queries)]).start()
            return
        if self.scenario == "Offline" or self.first_token_s:
            self.pending.put((time.monotonic(), list(queries)))
        else:
            self._answer(queries)

    def flush(self) -> None:
        pass

    def _answer(self, queries) -> None:
        if self.scenario != "Offline":
            self.lg.FirstTokenComplete([self.response(q, first=True) for q in queries])
        self.lg.QuerySamplesComplete([self.response(q) for q in queries])

    def _work(self) -> None:
        while True:
            arrived, queries = self.pending.get()
            if self.scenario != "Offline":
                time.sleep(max(0.0, arrived + self.first_token_s - time.monotonic()))
                self._answer(queries)
                continue
            step = 8  # complete Offline samples in small batches at the asked rate
            for start in range(0, len(queries), step):
                batch = queries[start:start + step]
                if self.rate:
                    time.sleep(len(batch) / self.rate)
                self._answer(batch)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import mlperf_loadgen as lg

    from cmx.mlperf.loadgen.userconf import audit_conf_test06
    from cmx.mlperf.rounds import load_round

    args.out.mkdir(parents=True, exist_ok=True)
    conf = write_user_conf(args)
    rules = load_round(args.round).benchmark(args.benchmark).scenario(args.scenario)
    settings = lg.TestSettings()
    settings.scenario = getattr(lg.TestScenario, rules.loadgen_scenario)
    settings.mode = lg.TestMode.AccuracyOnly if args.mode == "accuracy" else lg.TestMode.PerformanceOnly
    settings.FromConfig(str(conf), rules.loadgen_model, rules.loadgen_scenario)
    if args.from_config_twice:
        settings.FromConfig(str(conf), rules.loadgen_model, rules.loadgen_scenario)
    audit = args.out / "audit.config"  # LoadGen applies it only if the file exists
    if args.audit_test06:
        audit.write_text(audit_conf_test06(), encoding="utf-8")
    log = lg.LogSettings()
    log.log_output.outdir = str(args.out)
    log.enable_trace = False

    sut = TinySUT(lg, args.samples, args.n_tokens, args.scenario, args.first_token_ms / 1000, args.rate,
                  args.slow_every, args.slow_first_token_ms / 1000)
    lg_sut = lg.ConstructSUT(sut.issue, sut.flush)
    qsl = lg.ConstructQSL(args.samples, args.samples, lambda s: None, lambda s: None)
    try:
        lg.StartTestWithLogSettings(lg_sut, qsl, settings, log, str(audit))
    finally:
        lg.DestroyQSL(qsl)
        lg.DestroySUT(lg_sut)
    trace = args.out / "mlperf_log_trace.json"
    if trace.exists() and trace.stat().st_size == 0:
        trace.unlink()
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(SCRIPT.parents[3]))  # the repository, for cmx when it is not installed
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
