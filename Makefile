# flashproof — two commands on a fresh machine:  `make prove`  and  `make test`.
# Both create .venv if it is missing and install the package with what it needs.
PY     ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.flashproof-installed
# The CPU build of torch; override on a GPU machine (e.g. TORCH_SPEC='torch>=2.11,<2.14').
TORCH_SPEC ?= torch==2.13.0
JOBS   ?= 2

.PHONY: browser setup prove test test-all audit fuzz bench gpu-check gpu-probe clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e ".[triton,test]"
	@touch $@

browser:                       ## headless Chromium for the audit report's browser test (Debian package)
	@bash scripts/ensure_chromium.sh

prove: $(STAMP)                ## discharge every obligation; write out/audit.json and out/audit.md
	$(BIN)/flashproof prove --jobs $(JOBS)

# pytest's own script, not `python -m pytest`: the latter puts the checkout's root on sys.path, where our
# kernels/ folder shadows Hugging Face's `kernels` package, which transformers (>= 5.25) imports.
test: $(STAMP) browser         ## the test suite CI runs (CPU; Triton under TRITON_INTERPRET=1)
	$(BIN)/pytest -n $(JOBS) -m "not slow and not gpu" tests

test-all: $(STAMP)             ## everything, including slow tests
	$(BIN)/pytest -n $(JOBS) tests

audit: $(STAMP)                ## the browsable report under out/audit/
	$(BIN)/flashproof audit --jobs $(JOBS)

fuzz: $(STAMP)                 ## fuzz our kernel against the verified oracle
	$(BIN)/flashproof fuzz --kernel torch

# The GPU targets use the machine's own python3 with CUDA torch (not the CPU venv): scripts/gpu_session.sh
# installs the package from this checkout into /tmp/fp (pip --no-deps --no-build-isolation, no network).
bench:                         ## GPU: ours vs SDPA flash / cuDNN / efficient and FlexAttention; the sampler bench
	bash scripts/gpu_session.sh bench

gpu-check:                     ## GPU: kernel check (bf16/fp16/fp32, determinism, poison), fuzz campaigns, sampler tests
	bash scripts/gpu_session.sh check

gpu-probe:                     ## GPU: lab/probe.py timings (Triton vs Gluon, block-sparse breakdown)
	bash scripts/gpu_session.sh probe

clean:
	rm -rf out .prove-cache .pytest_cache .hypothesis
