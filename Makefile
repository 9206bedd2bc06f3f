# TunePlane developer commands. Only python3 (3.11+) is needed to start; each target
# installs what it uses into .venv.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/tuneplane

.PHONY: demo demo-stop test install install-test lint

$(VENV)/.installed: pyproject.toml sdk/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ./sdk -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PY) -m pip install --quiet -e './sdk' -e '.[test]'
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

## The main job on the embedded default: SQLite, filesystem storage, local executor.
demo: install
	$(PY) scripts/demo.py

demo-stop:
	$(PY) scripts/demo.py stop

## The whole suite on PostgreSQL, with real Redis, daphne, Celery, moto's S3 server and Chromium.
test: install-test
	bash scripts/ensure-test-services.sh
	TUNEPLANE_BROKER_URL=memory:// $(PY) -m pytest $(PYTEST_ARGS)
