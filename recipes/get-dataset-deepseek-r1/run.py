"""The deepseek-r1 dataset: the pickle downloaded and checked (the R2 list's md5, a sha256 when given), LiveCodeBench's
tests for its code rows, and the prompt ids the model's chat template makes; or all of it generated (_tiny)."""

from __future__ import annotations

import json
from pathlib import Path

from cmx.errors import StepError
from cmx.mlperf.benchmarks.deepseek_r1.dataset import (
    SAMPLES,
    TESTS_FILE,
    answers_of,
    dataset_names,
    load_deepseek,
    read_frame,
    subset_of,
    with_prompt_ids,
)
from cmx.tools.download import download
from cmx.tools.huggingface import is_commit
from cmx.tools.mlc_r2 import fetch_r2_file, is_r2_metadata


def run(ctx):
    name, rows, seed = ctx.inputs["filename"], ctx.inputs["rows"], ctx.inputs["seed"]
    if not name or "/" in name or "\\" in name or name in (".", ".."):
        raise StepError(f"{name!r} is not a plain file name", hint="pass --input filename=NAME, with no / or \\")
    tokenizer = Path(ctx.deps.model.outputs["tokenizer_path"])
    if ctx.variation("size") == "tiny":
        from cmx.mlperf.benchmarks.deepseek_r1.tiny import make_tiny_dataset

        made = make_tiny_dataset(ctx.workdir / name, tokenizer, rows=SAMPLES if rows is None else rows, seed=seed or 0)
        ctx.log.warning("generated %d deepseek-r1-format samples (seed %d): their answers are random, so accuracy "
                        "results with them mean nothing", made.rows, seed or 0)
        return {"path": made.path, "source": made.path, "tests": made.tests_path, "rows": made.rows, "is_tiny": True}
    given = [k for k in ("rows", "seed") if ctx.inputs[k] is not None]
    if given:
        raise StepError(f"{', '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to the tiny dataset only: the "
                        f"real one has its {SAMPLES} samples", hint="add _tiny to the query, or drop those inputs")
    source = _fetch_pickle(ctx, name)
    frame = read_frame(source)
    code_ids = sorted({str(a) for a, n in zip(answers_of(frame), dataset_names(frame))
                       if subset_of(n) == "livecodebench"})
    tests = ctx.workdir / TESTS_FILE
    _fetch_tests(ctx, code_ids, tests)
    dest = with_prompt_ids(source, ctx.workdir / name, tokenizer)
    dataset = load_deepseek(dest)  # the columns and types the harness and the scorer read
    if len(dataset) != SAMPLES:
        ctx.log.warning("%s has %d samples, not the %d of the official dataset", name, len(dataset), SAMPLES)
    return {"path": dest, "source": source, "tests": tests, "rows": len(dataset), "is_tiny": False}


def _fetch_pickle(ctx, name: str) -> Path:
    url, expected = ctx.inputs["url"], ctx.inputs["sha256"]
    if expected is not None and expected.strip().lower() in ("", "none", "null"):
        expected = None
    common = {"sha256": expected, "token": ctx.inputs["token"], "retries": ctx.inputs["retries"], "log": ctx.log}
    dest = ctx.workdir / "source" / name
    dest.parent.mkdir(parents=True, exist_ok=True)
    bar = ctx.progress(None, f"download {name}")
    if is_r2_metadata(url):
        got = fetch_r2_file(url, name, ctx.scratch / name, ctx.scratch / "metadata", on_progress=bar.update,
                            **common).moved_to(dest).result
    else:
        got = download(url, ctx.scratch / name, keep_partial=True, on_progress=bar.update, **common).moved_to(dest)
    if got.verified:
        ctx.log.info("%s: sha256 %s verified", name, got.sha256)
    else:
        ctx.log.warning("%s: sha256 %s (MLCommons publishes none); pin it with --input sha256=%s", name, got.sha256,
                        got.sha256)
    return dest


def _fetch_tests(ctx, code_ids: list[str], dest: Path) -> None:
    """LiveCodeBench's rows for the question_ids the code samples name, from tests_repo at tests_revision."""
    from cmx.mlperf.scoring.livecodebench import load_problems

    if not code_ids:
        dest.write_text("", encoding="utf-8")
        return
    repo, revision = ctx.inputs["tests_repo"], ctx.inputs["tests_revision"]
    if not is_commit(revision):
        raise StepError(f"the dataset has {len(code_ids)} LiveCodeBench samples, whose tests come from {repo}, and "
                        f"tests_revision is {revision!r}, not a commit: the reference loads that dataset's moving main "
                        "branch and pins none",
                        hint=f"pass --input tests_revision=COMMIT (40 hex digits; see "
                             f"{ctx.inputs['endpoint']}/datasets/{repo}/commits/main), and record it with your results")
    files = ctx.inputs["tests_files"].split()
    if ctx.inputs["tests_sha256"] and len(files) != 1:
        raise StepError("tests_sha256 checks one file, and tests_files names several",
                        hint="give one file, or drop tests_sha256")
    paths = []
    for file in files:
        url = f"{ctx.inputs['endpoint'].rstrip('/')}/datasets/{repo}/resolve/{revision}/{file}"
        target = ctx.scratch / "livecodebench" / file
        target.parent.mkdir(parents=True, exist_ok=True)
        got = download(url, target, sha256=ctx.inputs["tests_sha256"], token=None, retries=ctx.inputs["retries"],
                       keep_partial=True, on_progress=ctx.progress(None, f"download {file}").update, log=ctx.log)
        ctx.log.info("%s %s at %s: sha256 %s", repo, file, revision, got.sha256)
        paths.append(got.path)
    problems = load_problems(paths)
    missing = [q for q in code_ids if q not in problems]
    if missing:  # the reference grades them as wrong (benchmark_map.get(question_id) is None)
        ctx.log.warning("%d of %d LiveCodeBench question_ids are not in %s at %s (%s...): those samples score 0, as "
                        "in the reference", len(missing), len(code_ids), repo, revision, ", ".join(missing[:3]))
    wanted = set(code_ids)
    lines = []
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip() and json.loads(line).get("question_id") in wanted:
                lines.append(line + "\n")
    dest.write_text("".join(lines), encoding="utf-8")
