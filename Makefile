# Every set-up step lives here: `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DOCS_STAMP := $(VENV)/.docs-installed
# Environments are filled by uv (installed into .venv by pip first): it installs in seconds
# what pip takes minutes for, and its cache serves every later environment (the benchmark
# one, the wheel check's) without a download. pip's find-links, where this machine sets them
# (PyTorch's CPU build on disk), are uv's too.
UV := $(BIN)/uv
ifdef PIP_FIND_LINKS
export UV_FIND_LINKS ?= $(PIP_FIND_LINKS)
endif
# The peers (Optuna, Ray, Syne Tune) and YAHPO's surrogate live apart from the package's own.
BENCH_VENV ?= .bench-venv
BENCH_STAMP := $(BENCH_VENV)/.installed
BENCH_REQUIREMENTS := benchmarks/tuning/requirements.txt
BENCH_CONSTRAINTS := benchmarks/tuning/constraints.txt
# The benchmark environment is not compiled to bytecode when it installs (most of its modules
# are never imported; compiling them all takes a minute of both cores): its runs compile what
# they import and keep it (in the __pycache__ folders beside the modules, which git ignores),
# even where this machine says not to write bytecode.
BENCH_PYTHON := env -u PYTHONDONTWRITEBYTECODE $(BENCH_VENV)/bin/python
NAME ?= test_timings
TEST_WORKERS ?= 2
ROUNDS ?= 20

.PHONY: demo test docs lint typecheck unit unit-serial unit-parallel lock dist wheel-check bench bench-env bench-test bench-tuning bench-overhead clean test-timings test-stress
# SCALETUNE_JUNIT_DIR (make test-timings sets it): each pytest run writes its JUnit XML there.
junit = $(if $(SCALETUNE_JUNIT_DIR),--junitxml=$(SCALETUNE_JUNIT_DIR)/$(1).xml)

demo: $(STAMP)
	$(BIN)/scaletune demo

# The type-check runs beside the serial tests, which leave most of the machine idle (they wait
# on Ray's nodes and TensorFlow's processes); the parallel tests after both. Every step runs;
# a failure in any fails the whole.
test: lint
	rc=0; \
	$(MAKE) --no-print-directory -j2 -k typecheck unit-serial || rc=$$?; \
	$(MAKE) --no-print-directory unit-parallel || rc=$$?; \
	exit $$rc

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts

typecheck: $(STAMP)
	$(BIN)/mypy

# The suite in two phases: the tests marked serial first, one at a time (they need the whole
# machine: a multinode Ray, TensorFlow's fault tests, timings), then all others on
# $(TEST_WORKERS) pytest-xdist workers, a test file to a worker at a time so that a module's Ray
# instance starts once (each worker keeps one warm pool for all its modules). Both always run;
# the closing line is the second's.
unit: $(STAMP)
	rc=0; \
	$(MAKE) --no-print-directory unit-serial || rc=$$?; \
	$(MAKE) --no-print-directory unit-parallel || rc=$$?; \
	exit $$rc

# The serial phase collects only the files that mark a test serial (the whole suite's collection
# costs it some 20 s); tests/conftest.py fails a run that finds a serial test elsewhere.
SERIAL_TESTS = $(shell grep -rl 'mark\.serial' tests --include='test_*.py' | sort)

unit-serial: $(STAMP)
	$(BIN)/pytest -m serial $(SERIAL_TESTS) $(call junit,serial)

unit-parallel: $(STAMP)
	$(BIN)/pytest -m "not serial" -n $(TEST_WORKERS) --dist loadfile $(call junit,parallel)

test-stress: $(STAMP)  # tests/stress.txt, ROUNDS times beside a CPU hog: results/test_stress.md
	$(BIN)/python scripts/test_stress.py --rounds $(ROUNDS)

test-timings: $(STAMP)  # .ci/run from a clean clone, timed: benchmarks/results/$(NAME).md
	scripts/test-timings.sh $(NAME)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt uv
	$(UV) pip install --quiet --compile-bytecode --python $(BIN)/python -c constraints.txt -e '.[dev,ray,tensorflow,mlflow,tensorboard]'
	# Keras 2, for TensorFlow's multi-worker strategies (Keras 3 does not run them). It declares
	# the full `tensorflow` build (GPU kernels, 0.6 GB more) as its dependency; tensorflow-cpu,
	# installed above, is the same package for the CPU.
	$(UV) pip install --quiet --compile-bytecode --python $(BIN)/python -c constraints.txt --no-deps tf-keras
	touch $(STAMP)

# The documentation site into site/ (mkdocs.yml; reference pages from scripts/docs_hooks.py).
docs: $(DOCS_STAMP)  # NO_MKDOCS_2_WARNING: Material's end-of-life banner, printed on every build
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

$(DOCS_STAMP): $(STAMP) pyproject.toml
	$(UV) pip install --quiet --compile-bytecode --python $(BIN)/python -c constraints.txt -e '.[docs]'
	touch $(DOCS_STAMP)

dist: $(STAMP)  # the wheel and sdist, checked by twine
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*

wheel-check: $(STAMP)  # built, installed in a fresh venv outside the checkout, run from there
	scripts/check-wheel.sh

lock: $(STAMP) $(DOCS_STAMP)  # the docs extra too, so that its pins stay
	(echo "# Exact versions for a fresh machine (regenerate: make lock). torch is the CPU build on this disk."; \
	 $(BIN)/pip freeze --exclude-editable | grep -v -i '^scaletune' | sort -f) > constraints.txt

bench: $(STAMP)
	$(BIN)/python -m benchmarks.overhead.worker_start
	$(BIN)/python -m benchmarks.overhead.program_imports
	$(BIN)/python -m benchmarks.overhead.xgboost_job
	$(BIN)/python -m benchmarks.convergence.xgboost_workers
	$(BIN)/python -m benchmarks.convergence.lightgbm_workers
	$(BIN)/python -m benchmarks.overhead.lightgbm_job
	$(BIN)/python -m benchmarks.overhead.predictions
	$(BIN)/python -m benchmarks.tuning.reference --searcher Random --seeds 3
	$(BIN)/python -m benchmarks.convergence.dnn_modes --epochs 5
	$(BIN)/python -m benchmarks.convergence.scale_out --models mlp
	$(BIN)/python -m benchmarks.convergence.scale_out --models cnn --seeds 0 --name convergence_scale_out_cnn
	$(BIN)/python -m benchmarks.convergence.async_staleness
	$(BIN)/python -m benchmarks.convergence.adascale_cost
	$(BIN)/python -m benchmarks.overhead.dnn_job
	$(BIN)/python -m benchmarks.overhead.script_job
	$(BIN)/python -m benchmarks.convergence.advice_accuracy
	$(BIN)/python -m benchmarks.tensorflow.overhead
	$(BIN)/python -m benchmarks.tensorflow.convergence
	$(BIN)/python -m benchmarks.overhead.checkpoints
	$(BIN)/python -m benchmarks.overhead.tracking
	$(BIN)/python -m benchmarks.faults.xgboost_exact_resume
	$(BIN)/python -m benchmarks.faults.recovery
	$(BIN)/python -m benchmarks.faults.injection
	$(BIN)/python -m benchmarks.faults.elastic_preemption
	$(BIN)/python -m benchmarks.faults.elastic_quality
	$(BIN)/python -m benchmarks.store.scale
	$(BIN)/python -m benchmarks.scale.searchers --cap 300
	$(BIN)/python -m benchmarks.scale.searchers --sizes 100000 --only default --only Random --only PBT --only "several objectives" --cap 900 --name tuning_scale_100k
	$(BIN)/python -m benchmarks.store.round_trips
	$(BIN)/python -m benchmarks.store.console_pages --sizes 1000 10000 100000 --screenshots docs/console

$(BENCH_STAMP): $(STAMP) pyproject.toml $(BENCH_REQUIREMENTS) $(BENCH_CONSTRAINTS)
	$(PYTHON) -m venv $(BENCH_VENV)
	$(UV) pip install --quiet --python $(BENCH_VENV)/bin/python \
		-c $(BENCH_CONSTRAINTS) -r $(BENCH_REQUIREMENTS)
	touch $(BENCH_STAMP)

bench-env: $(BENCH_STAMP)

bench-test: $(BENCH_STAMP)  # the tests that need YAHPO's surrogate (they skip in .venv)
	$(BENCH_PYTHON) -m pytest -q tests/simulation/test_lcbench.py tests/simulation/test_lcbench_harness.py $(call junit,bench-test)

bench-tuning: $(BENCH_STAMP)
	$(BENCH_PYTHON) -m benchmarks.tuning.run
	$(BENCH_PYTHON) -m benchmarks.tuning.run --task-set other
	$(BENCH_PYTHON) -m benchmarks.tuning.multi_objective

bench-overhead: $(BENCH_STAMP)
	$(BENCH_PYTHON) -m benchmarks.overhead.decisions
	$(BENCH_PYTHON) -m benchmarks.overhead.trial_start
	$(BENCH_PYTHON) -m benchmarks.overhead.ray_start

clean:
	rm -rf $(VENV) $(BENCH_VENV) .mypy_cache .pytest_cache .ruff_cache
