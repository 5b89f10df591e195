# Each target installs what it needs into .venv, so a fresh clone needs only python3 >= 3.11.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install -q --disable-pip-version-check

.PHONY: demo test bench parity gpu-dry lint

$(PY):
	$(PYTHON) -m venv $(VENV)

# the suite, then the CUDA tests again on CuPy's NumPy stand-in: the GPU code paths, no GPU
# (and the ops once more on its second GPU, which is not the current one)
test: $(PY)
	$(PIP) -e '.[test,examples]'
	$(PY) -m pytest -n auto
	EMBER_FAKE_CUDA=1 $(PY) -m pytest -n auto tests/gpu
	EMBER_FAKE_CUDA=1 EMBER_CUDA_OPINFO_DEVICE=cuda:1 $(PY) -m pytest -n auto tests/gpu/test_opinfo_cuda.py

bench: $(PY)
	$(PIP) -e .
	$(PY) benchmarks/overhead.py

parity: $(PY)
	$(PIP) -e '.[test]' 'torch==2.13.0'
	$(PY) -m pytest -n auto -m parity

# the CUDA tests without a GPU: CuPy's NumPy stand-in, and the Triton kernels interpreted
gpu-dry: $(PY)
	$(PIP) -e '.[test]' 'triton>=3.9'
	EMBER_FAKE_CUDA=1 TRITON_INTERPRET=1 $(PY) -m pytest -n auto -p no:cacheprovider tests/gpu
	$(PY) -m pytest -n auto -p no:cacheprovider tests/gpu/test_triton_kernels.py

demo: $(PY)
	$(PIP) -e '.[examples]'
	$(PY) -m ember.examples.digits

lint: $(PY)
	$(PIP) ruff
	$(PY) -m ruff check src tests benchmarks examples
