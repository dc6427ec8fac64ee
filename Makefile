# graphscope — `make help` lists the targets.
PY            ?= python3
VENV          ?= .venv
BIN           := $(VENV)/bin
# CPU work (tests, lint, CI) pins one torch inside the supported range (pyproject's `torch`
# extra: >= 2.11); the GPU machines run 2.11. 2.13.0 is the CPU build this machine's index has.
TORCH_SPEC    ?= torch==2.13.0
# Pinned to the CUDA 13.0 line that torch 2.11+cu130 ships: headers only, never linked
# (cuda.h from runtime, cupti.h from cupti, crt/host_defines.h that they include from crt).
CUDA_HEADERS  ?= nvidia-cuda-runtime==13.0.96 nvidia-cuda-cupti==13.0.85 nvidia-cuda-crt==13.0.88
PYTEST_ARGS   ?=

.PHONY: help install build-ext test test-gpu lint demo bench fixtures clean

help: ## Show this help
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml CMakeLists.txt $(wildcard csrc/*.cpp csrc/*.h)
	$(PY) -m venv --system-site-packages $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q "scikit-build-core>=0.10" "nanobind>=1.9" $(CUDA_HEADERS)
	$(BIN)/python -m pip uninstall -q -y graphscope 2>/dev/null || true  # the name before cudagraph-scope
	$(BIN)/python -m pip install -q --no-build-isolation -e '.[dev]'
	$(BIN)/python .ci/editable_pth.py  # only `graphscope` importable, not the checkout root
	touch $@

install: $(VENV)/.installed ## Dev install (venv, torch, the native extension, test tools)

build-ext: install ## Rebuild the native extension after editing csrc/
	$(BIN)/python -m pip install -q --no-build-isolation --no-deps -e .
	$(BIN)/python .ci/editable_pth.py

test: install ## Run the test suite (GPU tests skip without a GPU)
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

test-gpu: install ## Run only the GPU tests (needs an NVIDIA GPU)
	$(BIN)/python -m pytest -q -m gpu $(PYTEST_ARGS)

lint: install ## ruff check and mypy
	$(BIN)/python -m ruff check graphscope cli tests bench sample_models
	$(BIN)/python -m mypy graphscope  # graphscope/cli is the cli/ folder (a symlink)

demo: install ## Capture the default sample model (or, without a GPU, report its recorded bundle)
	@if $(BIN)/python -m graphscope doctor --json --no-subscribe | grep -q '"gpu": "'; then \
		$(BIN)/graphscope capture --force -o graphscope-out/mlp.capture; \
	else \
		echo "No NVIDIA GPU here: showing the bundle of sample_models/mlp.py recorded on an H200"; \
		echo "(tests/data/demo/mlp_step). On a GPU machine this target captures it live."; \
		$(BIN)/graphscope report tests/data/demo/mlp_step; \
		echo "Bundle: tests/data/demo/mlp_step  (try: graphscope dump tests/data/demo/mlp_step --trace -o mlp.trace.json)"; \
	fi

bench: install ## Run the benchmarks (GPU) and print their JSON
	$(BIN)/python bench/bench_annotation.py
	$(BIN)/python bench/bench_timeline.py
	$(BIN)/python bench/accuracy.py

fixtures: install ## Re-record tests/data on a GPU machine
	$(BIN)/python tests/make_fixtures.py tests/data

clean: ## Remove build outputs and the venv
	rm -rf build $(VENV) graphscope-out .pytest_cache .ruff_cache .mypy_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
