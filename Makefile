# make lessons        run every lesson notebook headless, in the solved form (the main job); on a GPU
#                     the lessons' kernels compile meanwhile in background processes, one per CPU core
#                     (JOBS=4 for fewer), each lesson waiting only for its own; 4 lessons at a time on
#                     a GPU, 1 in the simulator (LESSON_JOBS=N)
# make test           the test suite on the CUDA simulator; no CUDA toolkit download; one pytest
#                     process per CPU core, 8 at most (pytest-xdist; make test TEST_JOBS=0 for one)
# make test-quick     the same without the tests marked slow (pytest -m "not slow")
# make test PTX=1     also install NVVM (~460 MB installed, the `ptx` extra) and compile every kernel for
#                     sm_75..sm_90 (what CI runs: .ci/run)
# make jupyter        JupyterLab on a scratch copy of the lessons (my-lessons/), never on lessons/
# make kernel         register the "hisparse-numba" Jupyter kernel in .venv
# Each target creates its own virtual environment (.venv) and installs what it needs, printing one
# line a phase (scripts/pip_progress.py); pip's whole output goes to .venv/pip-install.log.
# On a GPU machine add the CuPy extra for your CUDA major: make test CUDA=12 (or CUDA=13).
comma  := ,
PYTHON ?= python3
VENV   ?= .venv
CUDA   ?=
PTX    ?=
JOBS   ?=
LESSON_JOBS ?=
TEST_JOBS ?= auto
# JupyterLab options: make jupyter JUPYTER_ARGS="--ip=0.0.0.0 --port=8888 --no-browser"
JUPYTER_ARGS ?= --no-browser
LESSONS_COPY ?= my-lessons
GPU_EXTRA := $(if $(CUDA),cuda$(CUDA),)
# NVVM only when asked and no GPU extra is chosen (a GPU extra brings its own; no cu12/cu13 mix)
TEST_EXTRAS := test$(if $(GPU_EXTRA),$(comma)$(GPU_EXTRA),$(if $(PTX),$(comma)ptx,))
PIP    := $(VENV)/bin/python -m pip
# pip install with one line a phase (scripts/pip_progress.py); pip's whole output goes to the log
PIP_INSTALL := $(VENV)/bin/python scripts/pip_progress.py --log $(VENV)/pip-install.log
# Running as root (GPU containers) needs --allow-root.
ROOT_FLAG := $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root,)

.PHONY: lessons lessons-shipped test test-quick doctor jupyter kernel wheel clean hub-test browser-test

$(VENV)/bin/python:
	@echo "creating $(VENV) and upgrading its pip"
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.lessons-$(GPU_EXTRA): $(VENV)/bin/python pyproject.toml
	@echo "installing hisparse-numba[lessons$(if $(GPU_EXTRA),$(comma)$(GPU_EXTRA),)] into $(VENV) (a few minutes; pip's output: $(VENV)/pip-install.log)"
	$(PIP_INSTALL) -e ".[lessons$(if $(GPU_EXTRA),$(comma)$(GPU_EXTRA),)]"
	touch $@

$(VENV)/.test-$(TEST_EXTRAS): $(VENV)/bin/python pyproject.toml
	@echo "installing hisparse-numba[$(TEST_EXTRAS)] into $(VENV)$(if $(PTX), (NVVM: about 460 MB),) (pip's output: $(VENV)/pip-install.log)"
	$(PIP_INSTALL) -e ".[$(TEST_EXTRAS)]"
	touch $@

lessons: $(VENV)/.lessons-$(GPU_EXTRA)
	$(VENV)/bin/hisparse-numba doctor
	@echo "make lessons: the solved form (each exercise stub replaced by lessons/solutions/NN.py);"
	@echo "              'make lessons-shipped' runs them as a learner gets them"
	$(VENV)/bin/hisparse-numba lessons run --solved --warmup $(if $(JOBS),--compile-jobs $(JOBS),) $(if $(LESSON_JOBS),--jobs $(LESSON_JOBS),)

lessons-shipped: $(VENV)/.lessons-$(GPU_EXTRA)
	$(VENV)/bin/hisparse-numba lessons run

test: $(VENV)/.test-$(TEST_EXTRAS)
	$(VENV)/bin/python -m pytest -n $(TEST_JOBS) --maxprocesses 8

test-quick: $(VENV)/.test-$(TEST_EXTRAS)
	$(VENV)/bin/python -m pytest -n $(TEST_JOBS) --maxprocesses 8 -m "not slow"

doctor: $(VENV)/.lessons-$(GPU_EXTRA)
	$(VENV)/bin/hisparse-numba doctor

kernel: $(VENV)/.lessons-$(GPU_EXTRA)
	$(VENV)/bin/hisparse-numba kernel install --sys-prefix

jupyter: kernel
	@test -d $(LESSONS_COPY) || $(VENV)/bin/hisparse-numba lessons copy $(LESSONS_COPY)
	@echo "JupyterLab on $(LESSONS_COPY)/ (your copy; lessons/ stays clean). Options: JUPYTER_ARGS=\"...\""
	$(VENV)/bin/jupyter lab $(ROOT_FLAG) $(JUPYTER_ARGS) $(LESSONS_COPY)/

wheel: $(VENV)/bin/python
	$(PIP) wheel --no-deps -w dist .

LESSON ?= $(firstword $(wildcard lessons/00-*.ipynb))

$(VENV)/.hub: $(VENV)/.lessons-$(GPU_EXTRA)
	$(PIP) install -q jupyterhub
	npm install --silent --prefix .hub-node configurable-http-proxy
	touch $@

hub-test: $(VENV)/.hub
	$(VENV)/bin/python scripts/hub_smoke_test.py $(LESSON) --timeout 900

# Playwright's own Chromium where its download host is reachable, else Debian's chromium package
$(VENV)/.browser: $(VENV)/.lessons-$(GPU_EXTRA)
	$(PIP) install -q playwright
	@if $(VENV)/bin/python -m playwright install chromium >$(VENV)/playwright-install.log 2>&1; then \
	  echo "browser-test: Playwright's Chromium installed"; \
	elif command -v chromium >/dev/null; then \
	  echo "browser-test: Playwright's Chromium download failed ($(VENV)/playwright-install.log); using $$(command -v chromium)"; \
	else \
	  echo "browser-test needs Chromium: Playwright's download failed ($(VENV)/playwright-install.log)"; \
	  echo "and there is no chromium on PATH; on Debian/Ubuntu: apt-get install -y chromium"; exit 1; \
	fi
	touch $@

browser-test: $(VENV)/.browser
	$(VENV)/bin/python scripts/browser_test.py $(LESSON) --timeout 600 --screenshot build/browser-test.png

clean:
	rm -rf $(VENV) build dist .pytest_cache .hypothesis hisparse_numba/lessons/notebooks
