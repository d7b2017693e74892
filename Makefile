# Two entry points for a fresh machine: `make demo` (the main job: the Adult sweep) and `make test`
# (lint, the strict docs build and the test suite: exactly what CI runs, .ci/run).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

export FLWR_TELEMETRY_ENABLED=0
export FLWR_DISABLE_UPDATE_CHECK=1
export RAY_USAGE_STATS_ENABLED=0
export RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=0
export MPLBACKEND=Agg
export NO_MKDOCS_2_WARNING=1

.PHONY: demo test test-integration test-slow lint docs install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --no-compile -e '.[dev]'
	@# the bytecode pip would write, on every core; like pip, a file that does not compile is skipped
	$(PY) -m compileall -q -j 0 $(VENV)/lib || true
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/fedrr sweep configs/adult_planned.toml --repeats 1 --out results/demo/adult
	$(VENV)/bin/fedrr show results/demo/adult

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict -d build/site

# the suite on one worker per core (pytest-xdist); every test keeps to its own tmp_path, so the
# workers share nothing but the read-only tree and numba's on-disk cache (written atomically)
test: lint docs
	$(PY) -m pytest -q -n logical

# Flower simulations, the flwr CLI, deployments, Ray actors and clusters, whole sweeps and scripts
test-integration: $(STAMP)
	$(PY) -m pytest -q -m "integration and not slow"

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

clean:
	rm -rf $(VENV) results/demo .pytest_cache build/site
