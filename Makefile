# Every set-up step lives here: `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit lock bench clean

demo: $(STAMP)
	$(BIN)/scaletune demo

test: lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	touch $(STAMP)

lock: $(STAMP)
	(echo "# Exact versions for a fresh machine (regenerate: make lock). torch is the CPU build on this disk."; \
	 $(BIN)/pip freeze --exclude-editable | grep -v -i '^scaletune' | sort -f) > constraints.txt

bench: $(STAMP)
	$(BIN)/python -m benchmarks.start_overhead
	$(BIN)/python -m benchmarks.xgboost_overhead
	$(BIN)/python -m benchmarks.xgboost_workers
	$(BIN)/python -m benchmarks.tuning_reference --searcher Random
	$(BIN)/python -m benchmarks.dnn_modes --epochs 5
	$(BIN)/python -m benchmarks.dnn_overhead
	$(BIN)/python -m benchmarks.script_overhead

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
