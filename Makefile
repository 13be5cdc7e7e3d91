# The two commands a newcomer needs:  make demo  (the whole course on this machine)  and  make test.
# Both create the virtual environment .venv from the pins in pyproject.toml / constraints.txt when missing.

SHELL := /bin/bash
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
# Each BLAS call on one core: a CPU "device" in this course is one core (see docs/benchmarks.md).
export OMP_NUM_THREADS ?= 1
export OPENBLAS_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1
# make test's pytest-xdist workers: one per core and one more, since many tests wait on schedulers,
# servers and jobs (2 workers kept 2 cores 60% busy); tests/conftest.py keeps the cluster tests on one.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))

.PHONY: demo test test-extended test-all test-fast test-unit lint bench venv gpu release student-bundle hub-proxy lock clean i18n-update

# SETTINGS=site trains at the site profile's settings (about 25 min on 2 cores), where the lessons'
# numbers show; by default the demo's quick ones (course/instructor/demo_settings.py), within 10 min.
SETTINGS ?= quick
demo: $(VENV)/.installed
	$(PY) -m course demo $(if $(filter site,$(SETTINGS)),--site-settings) $(if $(COURSE_LANG),--lang $(COURSE_LANG))

# The tiers (markers in pyproject.toml, the guard in tests/conftest.py):
#   test           every capability once, on the real stack (training, notebooks, nbgrader, Slurm,
#                  OpenPBS, JupyterHub, a browser): within 20 minutes on 2 cores (README).
#   test-extended  the other cases of what make test covers (the other stage, the second fault of
#                  a kind, more planted mistakes and students); CI runs it after make test.
#   test-all       both, in one run.
#   test-fast      all but the slow: the unit tests and the quick ones that start MPI, jobs or nbgrader.
#   test-unit      no MPI, no jobs, no nbgrader apps, no Slurm, no browser (a test that starts one fails).
test: $(VENV)/.installed
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup -m "not extended"

test-extended: $(VENV)/.installed
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup -m extended

test-all: $(VENV)/.installed
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup

test-fast: $(VENV)/.installed
	$(PY) -m pytest -m "not slow"

test-unit: $(VENV)/.installed
	COURSE_TEST_TIER=unit $(PY) -m pytest -m "not integration and not slow"

# ruff (lint and format) and mypy on course/, as configured in pyproject.toml; CI runs it before the tests.
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

bench: $(VENV)/.installed
	$(PY) tools/bench.py

venv: $(VENV)/.installed

# Chainer 7.8.1 is a source distribution that needs setuptools<70 at build time, so the build tools
# are installed first and Chainer (with the kit) is built without build isolation.
$(VENV)/.installed: pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null || { \
	  echo "make: Python 3.11 is needed (Chainer 7.8.1 does not import on 3.12). Install it, or point"; \
	  echo "      PYTHON at it:  make PYTHON=/path/to/python3.11 $(MAKECMDGOALS)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -c constraints.txt $$($(PYTHON) tools/pins.py bootstrap)
	$(PIP) install -c constraints.txt --no-build-isolation -e ".[mpi,dev,hub]"
	touch $@

# The CUDA 12 stack, for a GPU node.
gpu: $(VENV)/.installed
	$(PIP) install -c constraints.txt --no-build-isolation -e ".[mpi,dev,hub,gpu]"
	$(PY) -m course doctor

# Regenerate the student release notebooks/ from solutions/ with nbgrader: every edition (English,
# and Japanese from course/locale/ja, as the assignment distributed_training_ja).
release: $(VENV)/.installed
	$(PY) -m course release

# The translations (course/locale/<lang>/LC_MESSAGES/*.po) follow the English: re-extract the marked
# messages and the notebooks' markdown, and merge (a changed English text leaves its entry fuzzy).
i18n-update: $(VENV)/.installed
	$(PY) -m course i18n update --lang ja

# What to hand out to students (never the repository: it holds solutions/): build/student-bundle.
# COURSE_LANG=ja: the Japanese edition (its notebooks, and the course's messages in Japanese).
# EXCHANGE=/shared/exchange: the exchange folder the students submit to (every student must be able
# to write it); default: $COURSE_EXCHANGE, else exchange/ here (one machine, one account only).
BUNDLE ?= build/student-bundle
EXCHANGE ?=
student-bundle: $(VENV)/.installed
	rm -rf $(BUNDLE) && $(PY) -m course bundle --out $(BUNDLE) $(if $(EXCHANGE),--exchange $(EXCHANGE)) $(if $(COURSE_LANG),--lang $(COURSE_LANG))

# JupyterHub's proxy (configurable-http-proxy, pinned with its dependencies in jupyterhub/package*.json),
# from the npm registry into build/hub-proxy: nothing global. docs/instructors.md ("On JupyterHub") starts the hub.
HUB_PROXY := build/hub-proxy/node_modules/.bin/configurable-http-proxy
hub-proxy: $(HUB_PROXY)

$(HUB_PROXY): jupyterhub/package.json jupyterhub/package-lock.json
	@command -v npm >/dev/null || { echo "make: npm is needed for JupyterHub's proxy (Node.js 20 or newer: apt-get install nodejs npm)"; exit 1; }
	mkdir -p build/hub-proxy && cp jupyterhub/package.json jupyterhub/package-lock.json build/hub-proxy/
	npm ci --prefix build/hub-proxy --no-audit --no-fund --loglevel=error
	touch $@

# Re-resolve the full lock (every transitive version) from the pins in pyproject.toml.
lock:
	rm -rf build/lock && $(PYTHON) -m venv build/lock
	build/lock/bin/pip install -q $$($(PYTHON) tools/pins.py bootstrap)
	build/lock/bin/pip install -q --dry-run --ignore-installed --no-build-isolation \
	  --report build/lock/report.json ".[mpi,dev,hub,gpu]"
	$(PYTHON) tools/pins.py lock build/lock/report.json > constraints.txt
	$(PYTHON) tools/pins.py conda > environment.yml

clean:
	rm -rf build $(VENV) .pytest_cache
