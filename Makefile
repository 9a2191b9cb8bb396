# make lessons   run every lesson notebook headless (the main job)
# make test      run the test suite
# Each target creates its own virtual environment (.venv) and installs what it needs.
# On a GPU machine add the CuPy extra for your CUDA major: make test CUDA=12 (or CUDA=13).
# Without CUDA=, tests install the `ptx` extra (NVVM) so that CPU-only CI compiles every kernel.
PYTHON ?= python3
VENV   ?= .venv
CUDA   ?=
GPU_EXTRA := $(if $(CUDA),cuda$(CUDA),)
PIP    := $(VENV)/bin/python -m pip

.PHONY: lessons test doctor jupyter clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.lessons-$(GPU_EXTRA): $(VENV)/bin/python pyproject.toml
	$(PIP) install -q -e ".[lessons$(if $(GPU_EXTRA),$(comma)$(GPU_EXTRA),)]"
	touch $@

$(VENV)/.test-$(GPU_EXTRA): $(VENV)/bin/python pyproject.toml
	$(PIP) install -q -e ".[test,$(if $(GPU_EXTRA),$(GPU_EXTRA),ptx)]"
	touch $@

comma := ,

lessons: $(VENV)/.lessons-$(GPU_EXTRA)
	$(VENV)/bin/hisparse-numba doctor
	$(VENV)/bin/hisparse-numba lessons run

test: $(VENV)/.test-$(GPU_EXTRA)
	$(VENV)/bin/python -m pytest

doctor: $(VENV)/.lessons-$(GPU_EXTRA)
	$(VENV)/bin/hisparse-numba doctor

jupyter: $(VENV)/.lessons-$(GPU_EXTRA)
	$(VENV)/bin/jupyter lab lessons/

clean:
	rm -rf $(VENV) build .pytest_cache .hypothesis
