# One command sets up and runs the main job; one sets up and runs the tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DATA ?= data/default
RUN ?= runs/heuristic-test

.PHONY: run test setup lint bench clean

$(BIN)/shopsimrl: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch first and pinned, so that pip takes the CPU build (the training extra would otherwise pull CUDA)
	$(BIN)/pip install --quiet 'torch==2.13.0'
	$(BIN)/pip install --quiet -e '.[dev,train,ray]'
	@touch $(BIN)/shopsimrl

setup: $(BIN)/shopsimrl
	bash scripts/ensure_chromium.sh

run: setup
	$(BIN)/shopsimrl data build-default --out $(DATA)
	$(BIN)/shopsimrl eval --data $(DATA) --split test --policy heuristic --out $(RUN)

test: setup
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/pytest

bench: setup
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) data runs build *.egg-info
