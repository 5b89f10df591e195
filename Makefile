# Each target installs what it needs into .venv, so a fresh clone needs only python3 >= 3.11.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install -q --disable-pip-version-check

.PHONY: demo test bench parity lint

$(PY):
	$(PYTHON) -m venv $(VENV)

test: $(PY)
	$(PIP) -e '.[test,examples]'
	$(PY) -m pytest -n auto

bench: $(PY)
	$(PIP) -e .
	$(PY) benchmarks/overhead.py

parity: $(PY)
	$(PIP) -e '.[test]' 'torch==2.13.0'
	$(PY) -m pytest -n auto -m parity

demo: $(PY)
	$(PIP) -e '.[examples]'
	$(PY) -m ember.examples.digits

lint: $(PY)
	$(PIP) ruff
	$(PY) -m ruff check src tests benchmarks examples
