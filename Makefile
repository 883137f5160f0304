# The two commands: `make demo` and `make test`. Both install what is missing first.
.PHONY: deps build demo test test-cpp test-python test-emulated-gpu bench gpu-check gpu-rehearsal format clean

BUILD ?= build
PY := $(CURDIR)/.venv/bin/python
JOBS ?= $(shell nproc)
# pytest runs in this many processes (pytest-xdist; 1 = one process). Tests are independent; the
# kernel caches they share are written atomically.
PYTEST_WORKERS ?= $(JOBS)
PYTEST_PAR := $(if $(filter-out 0 1,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS),)
CMAKE_FLAGS ?=

deps:
	@bash tools/deps.sh
	@bash tools/venv.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DPython_EXECUTABLE=$(PY) -DFLOW_WERROR=ON -DFLOW_REQUIRE_CPU_LIBS=ON $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	PYTHONPATH=$(CURDIR)/python $(PY) examples/demo.py

test: build test-cpp test-python test-emulated-gpu

test-cpp:
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-python:
	PYTHONPATH=$(CURDIR)/python $(PY) -m pytest -q $(PYTEST_PAR) tests/python

# The GPU tests and a smoke run of the GPU benchmark on the emulated CUDA device (no GPU needed):
# tests/cpp/simt/emulated_driver.cpp and tools/emulated_gpu_pytest.sh.
test-emulated-gpu:
	BUILD=$(CURDIR)/$(BUILD) PYTHON=$(PY) bash tools/emulated_gpu_pytest.sh -q $(PYTEST_PAR) -m gpu tests/python
	BUILD=$(CURDIR)/$(BUILD) PYTHON=$(PY) bash tools/emulated_gpu_pytest.sh --bench-smoke

bench: build
	PYTHONPATH=$(CURDIR)/python $(PY) bench/pointwise.py

gpu-check:
	bash tools/gpu_check.sh

# gpu-check's build (no LLVM, no oneDNN, static libstdc++ in the module) with the GPU tests on the
# emulated device: run it before a GPU session (tools/gpu_rehearsal.sh).
gpu-rehearsal: build
	BUILD=$(CURDIR)/$(BUILD) PYTHON=$(PY) bash tools/gpu_rehearsal.sh

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp' '*.cc' '*.cuh')

clean:
	rm -rf $(BUILD) python/flow/_C*.so
