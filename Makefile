PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint format clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/edgecnn demo

test: $(STAMP)
	$(BIN)/ruff check src tests lab
	$(BIN)/mypy
	$(BIN)/python -m pytest -n 2 --dist worksteal -q

lint: $(STAMP)
	$(BIN)/ruff check src tests lab
	$(BIN)/mypy
	$(BIN)/ruff format --check src tests lab

format: $(STAMP)
	$(BIN)/ruff format src tests lab
	$(BIN)/ruff check --fix src tests lab

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .ruff_cache .mypy_cache
