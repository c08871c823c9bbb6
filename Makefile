# One command sets up and runs the main job; one sets up and runs the tests.
# `make run` needs only the core install; `make test` (CI) adds the dev/train/ray extras, torch and a browser.
# Each level of setup leaves a stamp file in the venv, so `make run` then `make test` installs only the difference.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CORE_STAMP := $(VENV)/.shopsimrl-core
DEV_STAMP := $(VENV)/.shopsimrl-dev
DATA ?= data/default
RUN ?= runs/heuristic-test
# verl 0.9.1 pins transformers<5.11 (the main venv has a newer one), so its tests run in a venv of their own.
VERL_VENV ?= $(VENV)-verl
VERL_STAMP := $(VERL_VENV)/.shopsimrl-verl
VERL_TESTS := tests/test_train_verl.py tests/test_examples_verl.py

.PHONY: run test setup setup-core lint bench clean

$(CORE_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	@touch $@

$(DEV_STAMP): $(CORE_STAMP)
	# torch first and pinned, so that pip keeps this build (the training extra would otherwise pick its own)
	$(BIN)/pip install --quiet 'torch==2.13.0'
	$(BIN)/pip install --quiet -e '.[dev,train,ray]'
	bash scripts/ensure_chromium.sh
	@touch $@

$(VERL_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/pip install --quiet --upgrade pip
	$(VERL_VENV)/bin/pip install --quiet 'torch==2.13.0'
	$(VERL_VENV)/bin/pip install --quiet -e '.[verl]' pytest
	@touch $@

setup-core: $(CORE_STAMP)

setup: $(DEV_STAMP)

run: $(CORE_STAMP)
	$(BIN)/shopsimrl data build-default --out $(DATA)
	$(BIN)/shopsimrl eval --data $(DATA) --split test --policy heuristic --out $(RUN)

test: $(DEV_STAMP) $(VERL_STAMP)
	$(BIN)/ruff check src tests benchmarks examples
	# the template matrix compares the [verl] venv's outcomes with this one's (tests/test_train_template_matrix.py)
	SHOPSIM_VERL_VENV=$(VERL_VENV) $(BIN)/pytest
	$(VERL_VENV)/bin/pytest $(VERL_TESTS)

bench: $(DEV_STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) $(VERL_VENV) .venv-openenv .venv-verifiers data runs build *.egg-info
