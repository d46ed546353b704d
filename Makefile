# make run           : set up .venv if needed, then train model=tiny on the embedded toy corpus
# make test          : set up .venv if needed, then run the test suite on both cores (pytest-xdist)
# make test-fast     : the unit tests (all but tests/e2e and tests/interop, which train and export
#                      models), for the edit-test loop: about 40 seconds
# make test-portable : the tests that train, decode, export or compare precisions (PORTABLE_TESTS,
#                      but those marked `cli`: messages, files, statuses, no computed number) a
#                      second time, computing as another CPU would: PORTABLE=avx2 (torch, MKL, oneDNN
#                      and CTranslate2 held to AVX2) where torch computes with AVX-512, else
#                      PORTABLE=default (no vector code); .ci/run runs it after make test
# make config-docs   : docs/configuration.md's "Every key" written again from the schema (src/transformer_mt/schema)
# make lint          : ruff
# make clean         : remove caches only (.cache/, __pycache__/, .pytest_cache/, .ruff_cache/)
# make clean-venv    : remove the virtual environment (VENV, default .venv)
# make clean-outputs : remove every run directory under outputs/ (checkpoints, metrics); cannot be undone
# make test-floors   : the lowest supported versions (pyproject's >= bounds, pinned) in .venv-floors,
#                      then the tests that are not marked slow
#
# torch is installed first, as TORCH_SPEC (default: the CPU build of torch 2.13.0), and only
# where .venv has no torch yet. GPU users: make run TORCH_SPEC=torch==2.13.0 TORCH_INDEX_URL=<a
# CUDA wheel index>, or install the torch they want into .venv before `make`.
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX_URL ?=
ARGS ?=
PYTEST_ARGS ?=
# pytest-xdist workers (tests/conftest.py: one torch thread each, the shared runs trained once)
TEST_WORKERS ?= 2
XDIST = -n $(TEST_WORKERS)
BIN := $(VENV)/bin

FLOORS_VENV ?= .venv-floors

# numeric profiles: each library's code path fixed by its own environment variable (docs/layout.md)
PROFILE_avx2 = ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 CT2_FORCE_CPU_ISA=AVX2
PROFILE_default = ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE ONEDNN_MAX_CPU_ISA=SSE41 CT2_FORCE_CPU_ISA=GENERIC
# the profile one step below this CPU's own, so that it computes otherwise than the first pass; its
# compiled kernels in a cache of its own (with one cache for all, the compiled step failed to
# compile, or computed another loss, after another profile's pass)
PORTABLE ?= $(if $(filter AVX512,$(shell $(BIN)/python -c \
	"import torch; print(torch.backends.cpu.get_cpu_capability())" 2>/dev/null)),avx2,default)
PORTABLE_TESTS ?= tests/e2e tests/interop tests/training

.PHONY: install run test test-fast test-portable lint clean clean-venv clean-outputs test-floors config-docs

install: $(VENV)/.installed

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || \
		$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)" $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL))
	$(BIN)/python -m pip install --quiet -e ".[dev,export,serve]"
	touch $@

run: install
	$(BIN)/python run.py $(ARGS)

test: install
	$(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS)

test-fast: install
	$(BIN)/python -m pytest $(XDIST) -m "not slow" --ignore=tests/e2e --ignore=tests/interop $(PYTEST_ARGS)

test-portable: install
	$(if $(PROFILE_$(PORTABLE)),,$(error PORTABLE=$(PORTABLE): must be avx2 or default))
	@echo "numeric profile $(PORTABLE): $(PROFILE_$(PORTABLE))"
	env $(PROFILE_$(PORTABLE)) TORCHINDUCTOR_CACHE_DIR=$(CURDIR)/.cache/inductor-$(PORTABLE) \
		$(BIN)/python -m pytest $(XDIST) -m "not cli" $(PORTABLE_TESTS) $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .

clean:
	rm -rf .cache .pytest_cache .ruff_cache
	find . \( -path ./.git -o -path ./.venv -o -path './$(VENV)' \) -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +

clean-venv:
	rm -rf $(VENV)

clean-outputs:
	rm -rf outputs/*/

test-floors:
	$(PYTHON) -m venv $(FLOORS_VENV)
	$(FLOORS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(FLOORS_VENV)/bin/python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
		print('\n'.join(d.replace('>=', '==') for d in p['dependencies'] + p['optional-dependencies']['dev']))" \
		> $(FLOORS_VENV)/floors.txt
	$(FLOORS_VENV)/bin/python -m pip install --quiet -r $(FLOORS_VENV)/floors.txt \
		$(if $(TORCH_INDEX_URL),--extra-index-url $(TORCH_INDEX_URL))
	$(FLOORS_VENV)/bin/python -m pip install --quiet --no-deps -e .
	$(FLOORS_VENV)/bin/python -m pytest $(XDIST) -m "not slow" $(PYTEST_ARGS)

config-docs: $(VENV)/.installed
	$(BIN)/python -m transformer_mt.tasks.options.reference --write docs/configuration.md
