# The two commands: `make demo` and `make test`. Both set up the environment (tools/in-env).
IN_ENV := tools/in-env
BUILD := build

.PHONY: all build demo demo-mlp test test-pjrt test-cpp test-py test-dist test-asan test-asan-cpp clean env opinfo models pjrt-plugin jax titan test-titan diffusers torchao torchrec fuzz

all: build

env:
	$(IN_ENV) true

build:
	$(IN_ENV) bash -c 'cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null && ninja -C $(BUILD)'

demo: build
	$(IN_ENV) python3 examples/gpt.py

demo-mlp: build
	$(IN_ENV) python3 examples/mlp.py

# The pjrt runtime's CI subset: the suites that exercise the seam, modes and compile paths
# (the whole suite on pjrt is `make test-pjrt`, ~10 min here).
PJRT_CI := tests/python/test_runtime_seam.py tests/python/test_modes.py \
           tests/python/test_fused.py tests/python/test_ops_pointwise.py tests/python/test_ops_nn.py \
           tests/python/test_ops_views_copy.py tests/python/test_opinfo_fast.py \
           tests/python/test_kernel.py tests/python/test_dynamic_eager.py tests/python/test_ctc_loss.py \
           tests/python/test_strided_inputs.py tests/python/test_flex_attention.py tests/python/test_complex.py \
           tests/python/test_distributed.py::test_collectives_match_gloo[2]

test: build pjrt-plugin jax titan diffusers torchao torchrec
	$(IN_ENV) bash -c './$(BUILD)/tpu_cpp_tests --gtest_brief=1 && ./$(BUILD)/tpu_pjrt_tests --gtest_brief=1 && python3 -m pytest -q -n 2 --dist loadgroup tests/python && TORCH_TPU_RUNTIME=pjrt python3 -m pytest -q -n 2 $(PJRT_CI)'

# Every Python test on the pjrt runtime (expected failures: tests/python/pjrt_expected_failures.txt).
test-pjrt: build pjrt-plugin
	$(IN_ENV) env TORCH_TPU_RUNTIME=pjrt python3 -m pytest -q -n 2 tests/python

# The pinned XLA CPU PJRT plugin, installed into the environment (runs on the host: pip
# inside the environment cannot reach PyPI; docs/decisions/pjrt-plugin.md).
pjrt-plugin: env
	tools/pjrt-plugin

# The pinned JAX (jax, jaxlib, ml_dtypes, opt_einsum wheels) unpacked into the environment, for
# torch_tpu.kernel.from_jax and its tests (runs on the host like pjrt-plugin; without it those
# tests skip; docs/decisions/custom-kernels.md).
jax: env
	tools/jax

# The pinned TorchTitan 0.3.0 and the wheels it imports that Debian lacks (tools/titan-wheels.txt;
# 281 MB, most of it triton) unpacked into the environment's titan-site, for `python -m
# torch_tpu.titan` and tests/python/test_titan.py (runs on the host like jax).
titan: env
	tools/titan

# The pinned Diffusers and the huggingface-hub it needs (tools/diffusers-wheels.txt, 5 MB) in
# the environment's diffusers-site, for tests/python/test_diffusers.py.
diffusers: env
	tools/diffusers

# torchao's pure-Python wheel (tools/torchao-wheels.txt) in the environment's torchao-site, for
# tests/python/test_torchao.py.
torchao: env
	tools/torchao

# TorchRec with fbgemm-gpu-cpu and what they import (tools/torchrec-wheels.txt, 11 MB) in the
# environment's torchrec-site, for tests/python/test_torchrec.py.
torchrec: env
	tools/torchrec

# TorchTitan's whole matrix on tpu vs its CPU run (ranks, FSDP2 x TP, compile, AC, DCP resume);
# `make test` runs its fast subset.
test-titan: build titan
	$(IN_ENV) env TORCH_TPU_TITAN_FULL=1 python3 -m pytest -q tests/python/test_titan.py

# Every distributed test, the heavier ones too (4-process DTensor, a stuck rank, torchrun);
# `make test` runs the CI subset (tests/python/test_distributed*.py without dist_full).
test-dist: build
	$(IN_ENV) env TORCH_TPU_DIST_FULL=1 python3 -m pytest -q -n 2 tests/python/test_distributed.py tests/python/test_distributed_training.py

# Conformance: PyTorch's op_db and module_db on tpu vs CPU (README "Conformance"; ~25 min).
opinfo: build
	$(IN_ENV) python3 -m torch_tpu.opinfo --modules --json $(BUILD)/opinfo.json

# Model coverage: Hugging Face families (tiny configs) in strict, fused and compile modes vs CPU
# (README "Model coverage"; torch_tpu/models/README.md).
models: build
	$(IN_ENV) python3 -m torch_tpu.models --json $(BUILD)/models.json

# ASan + UBSan (tools/test-asan): the C++ suites and the extension in build-asan/, then a
# Python smoke subset on the sanitized extension. A cold build takes ~25 min on 2 cores, so
# `make test` does not run it; `make test-asan-cpp` is the C++ suites alone.
test-asan: pjrt-plugin
	$(IN_ENV) tools/test-asan

test-asan-cpp: pjrt-plugin
	$(IN_ENV) tools/test-asan --cpp

# Differential fuzzing vs PyTorch CPU, the long run (torch_tpu/fuzz; ~6 min here): 10,000 random
# op calls; fails on a failure not in torch_tpu/fuzz/known_failures.txt and lists the known lines
# the run did not reach (--check-stale fails on them). CI runs 1,000 calls (tests/python/test_fuzz.py).
FUZZ_CALLS ?= 10000
FUZZ_SEED ?= 1
fuzz: build
	$(IN_ENV) python3 -m torch_tpu.fuzz --calls $(FUZZ_CALLS) --seed $(FUZZ_SEED) --json $(BUILD)/fuzz.json

test-cpp: build
	$(IN_ENV) ./$(BUILD)/tpu_cpp_tests --gtest_brief=1

clean:
	rm -rf $(BUILD) build-asan build-pip torch_tpu/_C*.so
