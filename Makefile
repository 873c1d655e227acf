# Everything a fresh machine needs: `make repro` runs the pipeline, `make test` the suite.
VENV ?= .venv
PYTHON := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
SCIFACT ?= ../shared/data/scifact

.PHONY: install repro test reproduce-scifact bench clean

install: $(INSTALLED)

$(INSTALLED): pyproject.toml
	python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	# The CPU build of torch first, so nothing later resolves to a multi-GB CUDA build.
	$(PYTHON) -m pip install --quiet torch==2.13.0
	$(PYTHON) -m pip install --quiet -e '.[test]'
	touch $(INSTALLED)

repro: $(INSTALLED)
	PATH="$(abspath $(VENV))/bin:$$PATH" dvc repro

test: $(INSTALLED)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(PYTHON) -m pytest -n 2 --durations=10 -q

bench: $(INSTALLED)
	$(PYTHON) bench/generate_throughput.py

reproduce-scifact: $(INSTALLED)
	$(PYTHON) bench/reproduce_scifact.py $(SCIFACT)

clean:
	rm -rf $(VENV)
