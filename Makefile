# The two entry points: `make run` (default experiment) and `make test`.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -G Ninja -DCMAKE_BUILD_TYPE=Release
# Parallelism comes from clients training concurrently; each op stays on one
# thread (see tools/fedprof/main.cc).
export OMP_NUM_THREADS ?= 1

.PHONY: all deps build run test bench clean

all: build

deps:
	bash scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

run: build
	$(BUILD)/fedprof compare --config configs/default.toml --strategies fedavg,fedprof --seeds 1

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: build
	$(BUILD)/sim_throughput

clean:
	rm -rf $(BUILD)
