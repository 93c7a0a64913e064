# The two commands a new user runs: `make demo` and `make test`. Everything else is here
# for developers. Each target installs what it needs first.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc)

.PHONY: all demo test test-release test-asan bench deps configure clean

all: configure
	cmake --build $(BUILD) -j $(JOBS)

deps:
	scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DHEAPKIT_BUILD_TESTS=ON -DHEAPKIT_BUILD_BENCH=ON

# The tour (layers composed and measured against glibc), then the main job: heapkit tune
# takes a program of this project (the boxed-sim-like workload at full scale, about 0.3 s
# of CPU time) to the allocator that suits it: record, search, build, race the designs
# against glibc, jemalloc, mimalloc, tcmalloc and heapkit's libraries on the trace and on
# the program, recommend a point of the measured front, write a report. A few minutes;
# TUNE_ARGS adds tune's options (e.g. --prefer memory). Rerun: what is done is kept.
TUNE_ARGS ?=
demo: configure python
	cmake --build $(BUILD) -j $(JOBS) --target heapkit-tour heapkit-workload
	$(BUILD)/examples/heapkit-tour
	$(VENV)/bin/heapkit tune -o $(BUILD)/tune $(TUNE_ARGS) -- $(BUILD)/bench/heapkit-workload boxedsim

# Every test, in a release build and in an ASan+UBSan build. ASan's own malloc must return
# NULL on impossible sizes, as glibc does, for the tests of failure paths; the heaviest
# randomized checks run a quarter of their cases there (HEAPKIT_TEST_SCALE), all of them
# in the release build.
test: python test-release test-asan

test-release: configure
	cmake --build $(BUILD) -j $(JOBS)
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DHEAPKIT_SANITIZE=address,undefined \
	      -DHEAPKIT_BUILD_BENCH=OFF
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 HEAPKIT_TEST_SCALE=0.25 \
	ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS) -LE no-sanitizer

# Long benchmarks (figures go to docs/benchmarks.md): each part of the project adds its
# own bench-* target in mk/*.mk, and `make bench` runs them all.
BENCH_TARGETS :=
-include mk/*.mk

bench: $(BENCH_TARGETS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
