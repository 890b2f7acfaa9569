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

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/walrus-mem demo

test: $(STAMP)
	$(BIN)/python -m pytest

# The quick tier for a change-and-test loop: everything not marked slow
# (tests/conftest.py says what is), about 4 minutes here.
check: $(STAMP)
	$(BIN)/ruff check walrus_mem relayer_mock tests bench
	$(BIN)/python -m pytest -m "not slow" -q

lint: $(STAMP)
	$(BIN)/ruff check walrus_mem relayer_mock tests bench
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/recall.py
	$(BIN)/python bench/cold.py
	$(BIN)/python bench/embedders.py
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/locomo.py ../shared/data/locomo-dev.json

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
