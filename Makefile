# Each target creates .venv if missing, installs CPU torch first (the pinned
# version resolves to a local CPU build here; on other machines it is the
# normal PyPI wheel), then the project with its dev extras, then runs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test check lint bench install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# pip's own lines (Collecting / Downloading / Installing) are the progress: about 100 s on a
# fresh machine, so it does not run silently.
$(STAMP): $(BIN)/python pyproject.toml
	@echo "==> [1/3] pip (.venv)"
	$(BIN)/python -m pip install --quiet --upgrade pip
	@echo "==> [2/3] CPU torch 2.13.0 (for the sentence-transformers tests; the library needs no torch)"
	$(BIN)/python -m pip install --progress-bar off torch==2.13.0
	@echo "==> [3/3] walrus-mem with its dev extras (editable)"
	$(BIN)/python -m pip install --progress-bar off -e '.[dev]'
	touch $(STAMP)
	@echo "==> .venv ready"

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/walrus-mem demo

# Two workers, one file per worker at a time (module fixtures are set up once): the suite
# is CPU-bound and the machines here have 2 cores.
PYTEST_WORKERS ?= 2
test: $(STAMP)
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder

# The quick tier for a change-and-test loop: everything not marked slow
# (tests/conftest.py says what is), about 2.5 minutes here on two workers.
check: $(STAMP)
	$(BIN)/ruff check walrus_mem relayer_mock tests examples bench
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not slow" -q

lint: $(STAMP)
	$(BIN)/ruff check walrus_mem relayer_mock tests examples bench
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/recall.py
	$(BIN)/python bench/cold.py
	$(BIN)/python bench/embedders.py
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/locomo.py ../shared/data/locomo-dev.json

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
