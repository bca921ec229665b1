# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
# The Gaudi stack's Python, pinned as a Gaudi box has it (optimum-habana 1.21.2 -> transformers 4.55), on the
# same CPU torch; only what needs silicon is faked (tests/fakes). It is also the floor of transformers>=4.55.
GAUDI_VENV ?= .venv-gaudi
GAUDI_BIN := $(GAUDI_VENV)/bin
GAUDI_STAMP := $(GAUDI_VENV)/.installed
GAUDI_WORKERS ?= 3
TRACKING_URI ?= sqlite:///$(CURDIR)/mlflow.db
DEMO_EXPERIMENT ?= bridgetower-demo
# pip byte-compiles every module of every wheel it installs (23k files in .venv: 1.5 minutes of a core per venv);
# a process compiles only what it imports, once, where bytecode may be written: the installs skip compiling, and
# what make runs may write bytecode whatever the shell says (PYTHONDONTWRITEBYTECODE would compile on every start)
PIP := -m pip install -q --no-compile
unexport PYTHONDONTWRITEBYTECODE
# One process imports what every run and test process imports, once, right after the install: else the
# test workers and the first trainings, starting together, each compile the same modules (~10 CPU-s apiece)
WARM := import torch, transformers.trainer, datasets, mlflow, mlflow.server, mlflow.pyfunc, bridgetower_mlflow.cli, \
	bridgetower_mlflow.train.flow
# mypy's cache outlives the clone, like pip's: a fresh clone checks only what changed (85 s cold, 3 s warm)
MYPY_CACHE ?= $(HOME)/.cache/bridgetower-mlflow/mypy

.PHONY: install install-test install-gaudi lint demo test test-main test-gaudi test-fast ui clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python $(PIP) --upgrade pip
	# torch first, pinned: the CPU build (a range would pull a multi-GB CUDA build)
	$(BIN)/python $(PIP) "torch==2.13.0"
	$(BIN)/python $(PIP) -e .
	$(BIN)/python -c "$(WARM)"
	touch $@

install: $(STAMP)

$(TEST_STAMP): $(STAMP)
	$(BIN)/python $(PIP) -e ".[test,ray]"
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }
	@command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
		{ apt-get update -qq && apt-get install -y -qq postgresql >/dev/null; }
	# OpenMPI's mpirun: Gaudi's self-launch line is tested against the real one (tests/launch/test_launch_stop.py)
	@command -v mpirun >/dev/null || { apt-get update -qq && apt-get install -y -qq openmpi-bin >/dev/null; }
	touch $@

install-test: $(TEST_STAMP)

$(GAUDI_STAMP): pyproject.toml tests/fakes/habana_torch_plugin_metadata/pyproject.toml
	$(PYTHON) -m venv $(GAUDI_VENV)
	$(GAUDI_BIN)/python $(PIP) --upgrade pip
	$(GAUDI_BIN)/python $(PIP) "torch==2.13.0"
	$(GAUDI_BIN)/python $(PIP) -e ".[gaudi,test,mediapipe]" ./tests/fakes/habana_torch_plugin_metadata
	$(GAUDI_BIN)/python -c "$(WARM)"
	touch $@

install-gaudi: $(GAUDI_STAMP)

demo: install
	$(BIN)/bridgetower-mlflow sample-data
	MLFLOW_TRACKING_URI=$(TRACKING_URI) PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/mlflow run . -e train -P accel=cpu --env-manager local \
		--experiment-name $(DEMO_EXPERIMENT)
	@echo
	@echo "Browse the run:  $(BIN)/mlflow ui --backend-store-uri $(TRACKING_URI) --port 5000"
	@echo "then open http://127.0.0.1:5000 and pick the '$(DEMO_EXPERIMENT)' experiment (Model training view)."

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy --cache-dir $(MYPY_CACHE)

# The Gaudi stack's run (its own venv, one worker) goes beside the main suite's, not after it: the main suite
# leaves part of the two cores idle while its workers wait on servers, subprocesses and clocks. Four main workers
# on two cores: with one torch thread a process (tests/conftest.py) a worker waits most of its time, and the longest
# files (a Ray cluster's, the device rehearsal's, the outages') hold a worker for minutes each; files go out longest
# first. The Gaudi run's output, kept in test-gaudi.log, follows the main suite's.
MAIN_WORKERS ?= 4
GAUDI_LOG := test-gaudi.log
test:
	@{ $(MAKE) --no-print-directory test-gaudi GAUDI_WORKERS=1 > $(GAUDI_LOG) 2>&1; echo $$? > $(GAUDI_LOG).rc; } & \
	  gaudi=$$!; \
	  $(MAKE) --no-print-directory lint && $(BIN)/python -m pytest -q -n $(MAIN_WORKERS) --dist loadfile --no-loadscope-reorder; \
	  main=$$?; wait $$gaudi; echo; echo "== make test-gaudi, run beside the main suite:"; cat $(GAUDI_LOG); \
	  exit $$(( main != 0 || $$(cat $(GAUDI_LOG).rc) != 0 ))

# On the Gaudi stack, the tests marked gaudi_stack: optimum-habana's own tests, every vendor-Python test, the CPU
# path's train, resume and serve tests (transformers 4.55 is the floor of the declared range), the truth tests of
# the real GaudiTrainer's GA and resume runs, the phase breakdown through it, and how 4.55 opens each epoch.
# optimum-habana's version check runs `pip list` from PATH; no Hub here (Habana/clip comes from the embedded copy)
test-gaudi: install-gaudi
	PATH="$(CURDIR)/$(GAUDI_BIN):$$PATH" HF_HUB_OFFLINE=1 $(GAUDI_BIN)/python -m pytest -q -n $(GAUDI_WORKERS) --dist loadfile --no-loadscope-reorder -m gaudi_stack

test-fast: lint
	$(BIN)/python -m pytest -q -m "not slow"

ui: install
	$(BIN)/mlflow ui --backend-store-uri $(TRACKING_URI) --port 5000

clean:
	rm -rf $(VENV) $(GAUDI_VENV) mlflow.db mlruns mlartifacts outputs
