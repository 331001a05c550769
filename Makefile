# Two commands set everything up: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
# e.g. https://download.pytorch.org/whl/cpu for a CPU-only torch (PyPI's Linux wheel brings CUDA)
TORCH_INDEX ?=
BIN := $(VENV)/bin
# Two installs: `make demo` needs torch, the core and the `report` extra (its figures) alone;
# `make test` (and lint, docs, bench) adds every extra the tests and the site use (triton,
# transformers, lm-eval, mkdocs...: GBs and minutes the demo does not need).
DEMO_STAMP := $(VENV)/.demo-installed
STAMP := $(VENV)/.installed
DEMO_EXTRAS := report
FULL_EXTRAS := dev,report,digits,subword,tensorboard,hub,slurm,hf,rl,docs

.PHONY: demo test test-slow docs lint bench install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(DEMO_STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q "$(TORCH)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install -q -e ".[$(DEMO_EXTRAS)]"
	touch $(DEMO_STAMP)

$(STAMP): $(DEMO_STAMP)
	$(BIN)/python -m pip install -q -e ".[$(FULL_EXTRAS)]"
	touch $(STAMP)

install: $(STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/highway demo --out runs/demo

test: $(STAMP)
	$(BIN)/python -m pytest
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir build/site

test-slow: $(STAMP)
	$(BIN)/python -m pytest -m slow

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir build/site

lint: $(STAMP)
	$(BIN)/ruff check .

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_gates.py

clean:
	rm -rf $(VENV) runs build *.egg-info
