# ddpbench: every target works alone on a fresh clone (bench and test build the venv first).
# Variables map onto `ddpbench bench` flags; unset ones take the CLI's defaults.
#   make bench GPUS=8 IMPLS=naive,stock WORKLOADS=mlp,gpt2 BUCKETS="1 25" SIZE=small STEPS=20
#   (also WARMUP, BATCH, DEVICE, OPTIMIZER=adamw, and ARGS for any other flag: ARGS=--dry-run forecasts only)
# BUDGET: how long `make bench` goes on repeating to decide its verdicts (--repeats auto): a first
# answer in minutes; BUDGET= (empty) repeats until decided or --max-repeats. `make sweep` has none
# unless you give one (make sweep BUDGET=10m).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
NOT_PRECOMPILED := /tests?/|/transformers/models/(?!(auto|gpt2|bert|t5|vit|llama)/)
RESULTS ?= results
BUDGET ?= 5m
SITE   ?= reports/site

comma := ,
empty :=
space := $(empty) $(empty)
# 'naive stock', 'naive,stock' and 'naive, stock' are one list; '1,,5' stays as typed, for bench to refuse.
commas = $(subst $(space),$(comma),$(subst $(space)$(comma),$(comma),$(subst $(comma)$(space),$(comma),$(strip $(1)))))
# Non-empty unless ARGS fixes the repeats (--repeats N): BUDGET bounds --repeats auto only, which refuses it.
auto_repeats = $(if $(findstring --repeats,$(ARGS)),$(or $(findstring --repeats auto,$(ARGS)),$(findstring --repeats=auto,$(ARGS))),yes)

BENCH_FLAGS := $(if $(GPUS),--gpus $(GPUS)) \
	$(if $(IMPLS),--impls $(call commas,$(IMPLS))) \
	$(if $(WORKLOADS),--workloads $(call commas,$(WORKLOADS))) \
	$(if $(BUCKETS),--bucket-cap-mb $(call commas,$(BUCKETS))) \
	$(if $(SIZE),--size $(SIZE)) \
	$(if $(STEPS),--steps $(STEPS)) \
	$(if $(WARMUP),--warmup $(WARMUP)) \
	$(if $(BATCH),--batch-size $(BATCH)) \
	$(if $(DEVICE),--device $(DEVICE)) \
	$(if $(OPTIMIZER),--optimizer $(OPTIMIZER)) \
	$(if $(and $(BUDGET),$(call auto_repeats)),--budget $(BUDGET)) \
	--results $(RESULTS) $(ARGS)

.PHONY: setup bench sweep report publish perf gpu-check test lint clean

setup: $(STAMP)

# The stamp makes a second `make setup` free; it is rebuilt when the dependencies change. pip compiles
# what it installs one file at a time (torch alone: 36 s of a 94 s setup here); compileall does it on
# every core instead; a file that does not compile (a template, say) is left alone, as pip leaves it.
# The packages' own test suites and the transformers models no workload of ours builds are left to be
# compiled if ever imported (5,500 of 15,000 files: 36 s -> 28 s here).
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -e '.[dev]'
	$(BIN)/python -m compileall -q -j 0 -x '$(NOT_PRECOMPILED)' $$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') > /dev/null || true
	touch $(STAMP)

# The report is rebuilt when the run finished, even if a configuration failed (exit 1: the
# report shows the failure), but not after bad input (exit 2: nothing was run or written) nor after
# --dry-run (nothing written: the results folder may not exist yet). DDPBENCH_REPORT_NEXT tells bench
# that the report is built next, so that it does not tell the user to build it.
dry_run = $(findstring --dry-run,$(ARGS))
bench: setup
	@status=0; DDPBENCH_REPORT_NEXT=1 $(BIN)/ddpbench bench $(BENCH_FLAGS) || status=$$?; \
	if [ $$status -le 1 ] && [ -z "$(dry_run)" ]; then $(BIN)/ddpbench report --results $(RESULTS) --out $(SITE) || exit $$?; fi; \
	exit $$status

# A bucket_cap_mb response curve: `make bench` over a list of caps (DDP's default 25 included),
# repeated until each cap's verdict is decided (REPEATS=auto, the default; or a fixed count: a cap is
# recommended only on evidence over repeats; docs/statistics.md).
# BUDGET reaches it only where you gave one (on the command line or in the environment), not make bench's default.
sweep_budget = $(if $(filter command environment,$(firstword $(origin BUDGET))),$(BUDGET))
sweep:
	$(MAKE) bench BUCKETS="$(or $(BUCKETS),1 5 10 25 50 100)" BUDGET="$(sweep_budget)" ARGS="--repeats $(or $(REPEATS),auto) $(ARGS)"

report: setup
	$(BIN)/ddpbench report --results $(RESULTS) --out $(SITE)

# A self-contained folder (plotly.js shipped once, relative links) plus a tarball to upload.
publish: report
	tar -czf reports/site.tar.gz -C $(dir $(SITE)) $(notdir $(SITE))
	@echo "publish: $(SITE)/ is ready to copy to any static host; archive: reports/site.tar.gz"

# Speed goals are checked here, side by side in one run, never by timed unit tests.
perf: setup
	$(BIN)/python benchmarks/strategies.py
	$(BIN)/python benchmarks/overhead.py

# On a machine with a CUDA GPU: the GPU acceptance (benchmarks/gpu_check.py: every strategy in bf16,
# parity, events, NVML, the sampler's cost, bucketed/stock, the fixed cost, a profiled trace), run
# with the machine's own python and torch: GPU boxes often have no network to build a venv with.
# QUICK=1 runs its CPU subset.
gpu-check:
	PYTHONPATH=. $(PYTHON) benchmarks/gpu_check.py $(or $(OUT),gpu-check) $(if $(QUICK),--quick)

# JOBS test workers (pytest-xdist): most tests wait on the ranks they launch; a test file stays on one
# worker, so that its module fixtures run once.
JOBS ?= 2
test: setup
	$(BIN)/python -m pytest -q -n $(JOBS) --dist loadfile

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) $(SITE) reports/site.tar.gz .pytest_cache .ruff_cache *.egg-info
