# The two entry points: `make run` (default experiment) and `make test`.
# `make docs` writes docs/options.md and the docs' generated blocks from the
# option table (scripts/docs.py; `make test` fails while they are stale).
# Hostile input: `make test-asan` (the whole suite under ASan + UBSan) and
# `make fuzz` (every libFuzzer target for FUZZ_SECONDS each); both use the
# clang sanitizer build in $(ASAN_BUILD).
BUILD ?= build
JOBS ?= $(shell nproc)
# A unity build compiles each target's files in groups (CMakeLists.txt,
# fedprof_unity_groups): a fresh build takes about half as long.
CMAKE_FLAGS ?= -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON
# Parallelism comes from clients training concurrently; each op stays on one
# thread (see tools/fedprof/main.cc).
export OMP_NUM_THREADS ?= 1

.PHONY: all deps build run test test-unit docs bench clean asan-build test-asan fuzz

# The sanitizer build: clang-14 with AddressSanitizer, UndefinedBehaviorSanitizer
# and libFuzzer's coverage instrumentation (CMakeLists.txt, FEDPROF_FUZZ), at
# -O1 with debug information for readable reports.
ASAN_BUILD ?= build-asan
ASAN_CMAKE_FLAGS ?= -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g" -DCMAKE_CXX_COMPILER=clang++-14 -DFEDPROF_FUZZ=ON
FUZZ_SECONDS ?= 60
SANITIZERS := $(CURDIR)/scripts/sanitizers
# Any finding aborts; leaks are reported; suppressions name third-party code only.
SANITIZER_ENV := ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:suppressions=$(SANITIZERS)/ubsan.supp \
  LSAN_OPTIONS=suppressions=$(SANITIZERS)/lsan.supp:print_suppressions=0

all: build

deps:
	bash scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# Only what it runs: the command-line tool, not the tests and benchmarks.
run: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target fedprof_cli
	$(BUILD)/fedprof compare --config configs/default.toml --strategies fedavg,fedprof --seeds 1

# Every test, then the ten slowest (scripts/slowest_tests.py).
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -O ctest.log; status=$$?; \
	  /usr/bin/python3 $(CURDIR)/scripts/slowest_tests.py ctest.log; exit $$status

# The inner loop: the in-process unit tests only (ctest -L unit).
test-unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L unit

docs: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target fedprof_cli fedprof_python fedprof_python_package
	/usr/bin/python3 scripts/docs.py generate --cli $(BUILD)/fedprof
	PYTHONPATH=$(BUILD)/python /usr/bin/python3 scripts/python_api.py generate

bench: build
	$(BUILD)/sim_throughput

$(ASAN_BUILD)/build.ninja:
	cmake -S . -B $(ASAN_BUILD) $(ASAN_CMAKE_FLAGS)

# The test binary lists its tests at build time (cmake/gtest_suites.cmake), so
# the sanitizer settings apply to the build too.
asan-build: deps $(ASAN_BUILD)/build.ninja
	$(SANITIZER_ENV) cmake --build $(ASAN_BUILD) -j $(JOBS) --target fedprof_tests_ctest fedprof_cli rogue_client \
	  fuzz_targets

test-asan: asan-build
	cd $(ASAN_BUILD) && $(SANITIZER_ENV) ctest --output-on-failure -j $(JOBS)

fuzz: deps $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target fuzz_targets
	bash scripts/fuzz.sh $(ASAN_BUILD) $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
