# `make test` and `make demo` do all set-up themselves on a machine with only Python 3.10+.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
CMX    := $(VENV)/bin/cmx
STAMP  := $(VENV)/.installed-dev

.PHONY: venv test test-serial test-docker test-podman serial-then-podman docker-then-rootless test-ray test-fast test-install lint demo bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# the cpu extra brings vLLM's CPU build (and scale: Ray, the Kubernetes client and schemas); its
# torchvision, torchaudio and torchcodec are CUDA builds that break `import vllm` on a CPU-only
# torch, so they are removed again
venv: $(STAMP)  ## only the set-up: .venv with cmx and every extra the tests use

# (until 0.2.0 the distribution was named cmx: an old .venv's is removed first, before it shares bin/cmx)
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip uninstall --quiet --yes cmx 2>/dev/null || true
	$(PY) -m pip install --quiet -e '.[dev,cpu,scale,report,video]'
	$(PY) -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
	touch $@

# three passes: the unit tests on two workers; the end-to-end tests on two workers, a test file per worker (its
# tests run in order, its shared engine, server or image made once), each worker's vLLM engines on a core of
# their own; then the container and serial ones in two lanes. One lane runs, one at a time, the end-to-end tests
# marked `serial`: those judged on time (a LoadGen Server run's TTFT and TPOT, a deadline), which must not share
# the CPUs with another test of theirs; then podman's rootful ones. The other runs the `docker` ones, then podman's
# rootless one: mostly an image build each, pip in a container on one core, where the serial tests leave about
# three quarters of a core idle (their judged latencies are a tenth of their limits here). The container tests'
# benchmark runs and each serial module hold one lock (tests/conftest.py, timed_cpu_section), so that those never
# overlap (a Server test beside the container's vLLM run failed at 20 times its latency). A build itself (pip, the
# engine's layer commits) can still take both cores for a while, so the serial tests run at a higher CPU priority
# where the user may raise it (root; elsewhere as they are): a Server test beside two busy loops had a TPOT p99 of
# 484 ms, over its 200 ms limit, and passed at nice -10 (CI failed once on it). podman's two builds sit one in
# each lane, so that the lanes end close together (both after the serial tests, they made that lane the longer by
# about five minutes). The Ray tests come last, alone: their two replicas hold a core each (beside a build, they
# took 70 % longer). Each part's output is printed whole when it ends (--output-sync).
RAY_TESTS := tests/mlperf/backends/test_ray_replicas.py
PODMAN_ROOTLESS_TESTS := tests/docker/test_podman_rootless.py
TIMED_PRIORITY := $(shell [ "$$(id -u)" = 0 ] && echo nice -n -10)
test: $(STAMP)  ## every test, the slow end-to-end ones (-m e2e) included
	$(PY) -m pytest -q -m "not e2e" -n 2 --durations=10
	$(PY) -m pytest -q -m "e2e and not serial and not docker and not podman" -n 2 --dist loadfile --durations=25
	$(MAKE) --no-print-directory -j2 --output-sync=target test-ray

# make test's last pass, in lanes: make -j2 runs the serial tests and then podman's rootful ones, beside Docker's and
# then podman's rootless one; then Ray's
test-serial: $(STAMP)  ## the serial e2e tests but Ray's, one at a time
	$(TIMED_PRIORITY) $(PY) -m pytest -q -m "e2e and serial" --ignore=$(RAY_TESTS) -p no:cacheprovider --durations=25

test-docker: $(STAMP)  ## the e2e tests on a Docker engine
	$(PY) -m pytest -q -m "e2e and docker" -p no:cacheprovider --durations=10

PODMAN_PYTEST := $(PY) -m pytest -q -m "e2e and podman" -p no:cacheprovider --durations=10

test-podman: $(STAMP)  ## the e2e tests on podman, rootful and rootless
	$(PODMAN_PYTEST)

serial-then-podman: test-serial
	$(PODMAN_PYTEST) --ignore=$(PODMAN_ROOTLESS_TESTS)

docker-then-rootless: test-docker
	$(PODMAN_PYTEST) $(PODMAN_ROOTLESS_TESTS)

test-ray: serial-then-podman docker-then-rootless  ## the Ray e2e tests (two one-CPU nodes), after the serial, podman and Docker ones
	$(PY) -m pytest -q -m "e2e and serial" $(RAY_TESTS) -p no:cacheprovider --durations=10

# cmx as a user installs it: the sdist, the wheel built from it, installed with the cpu extra into a fresh venv
# outside the checkout, then find, the tiny llama2 app, packaging and check from a folder with no checkout
test-install: $(STAMP)  ## build the sdist and wheel, install the wheel in a fresh venv, run it outside the checkout
	PYTHON=$(PY) bash .ci/install-check.sh

test-fast: $(STAMP)  ## unit tests only
	$(PY) -m pytest -q -m "not e2e"

# pyproject.toml holds both configurations: ruff over the whole tree, mypy over cmx/ and the recipes' Python files
# (through their links in tests/typecheck/recipes/)
lint: $(STAMP)  ## ruff and mypy; fails on any finding
	$(VENV)/bin/ruff check
	$(VENV)/bin/mypy --config-file pyproject.toml

# BENCH picks the benchmark: llama2 (llama2-70b, the default), llama3.1-8b, llama3.1-405b, mixtral-8x7b,
# deepseek-r1, gpt-oss-120b, whisper (Offline only; its demo also runs TEST01, whisper's compliance test), qwen3-vl
# (through the vllm serve cmx starts: its samples are chats with an image) or wan-2.2-t2v-a14b (a diffusers pipeline
# in process, Offline and SingleStream, TEST04, VBench in its own environment)
BENCH           ?= llama2
comma           := ,
WAN             := wan-2.2-t2v-a14b
DEMO_SCENARIOS  := $(if $(filter whisper,$(BENCH)),Offline,Offline$(comma)$(if $(filter $(WAN),$(BENCH)),SingleStream,Server))
DEMO_MODES      := performance$(comma)accuracy$(if $(filter whisper $(WAN),$(BENCH)),$(comma)compliance)
DEMO_SUFFIX     := $(if $(filter-out llama2,$(BENCH)),-$(BENCH))
DEMO_RESULTS    := results/demo$(DEMO_SUFFIX)
DEMO_SUBMISSION := results/demo$(DEMO_SUFFIX)-submission
# what a _short run breaks by design (600 s, 24576 samples, the whole dataset; wan's tiny run, 4 prompts, also holds
# none of the 10 videos the checker wants): cmx check must find exactly these in the demo's tree, and nothing else
DEMO_EXPECTED   := loadgen.min-duration,loadgen.sample-count,accuracy.coverage$(if $(filter $(WAN),$(BENCH)),$(comma)accuracy.extra-files)

# llama2-70b (or BENCH=llama3.1-8b) on the CPU: a tiny random model and 256 generated samples, cmx's short LoadGen profile,
# Offline and Server, performance and accuracy: the whole pipeline in a few minutes, never a result;
# then packaged for the open division and checked
demo: $(STAMP)  ## run MLPerf llama2-70b (BENCH=llama3.1-8b, whisper, ...: another; tiny model, short, CPU) end to end, package it, check the tree
	rm -rf $(DEMO_RESULTS) $(DEMO_SUBMISSION) $(DEMO_SUBMISSION).tar.gz
	$(CMX) run "app mlperf inference $(BENCH) _cpu _tiny _short" --input scenarios=$(DEMO_SCENARIOS) \
	  --input modes=$(DEMO_MODES) --input results_dir=$(DEMO_RESULTS) --progress plain
	$(CMX) run "generate mlperf submission" --input results_dir=$(DEMO_RESULTS) \
	  --input out_dir=$(DEMO_SUBMISSION) --input submitter=cmx-demo --input division=open \
	  --input system_file=docs/examples/system-demo.yaml --input tar=true --progress plain
	$(CMX) check $(DEMO_SUBMISSION) --csv $(DEMO_SUBMISSION).csv --expect $(DEMO_EXPECTED)
	$(CMX) report $(DEMO_RESULTS) --out $(DEMO_RESULTS)/report.html
	@echo "--- results: $(DEMO_RESULTS)/ (table: summary.txt); submission tree: $(DEMO_SUBMISSION)/open/cmx-demo/, \
	archive: $(DEMO_SUBMISSION).tar.gz, checker CSV: $(DEMO_SUBMISSION).csv, report: $(DEMO_RESULTS)/report.html"

bench: $(STAMP)  ## start-up, plan and cached-run figures (bench/README.md has the others: harness, endpoint, tune)
	$(PY) bench/plan_speed.py

clean:
	rm -rf $(VENV) runs results .pytest_cache
