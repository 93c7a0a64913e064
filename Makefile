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

# A short tour: composes heaps and compares them with glibc on allocation-heavy work, records
# a program, simulates the DMM presets on its trace and runs two of them for real (the
# "bytes held (design)" column is what the simulator predicted, to the byte).
demo: configure python
	cmake --build $(BUILD) -j $(JOBS) --target heapkit-tour
	$(BUILD)/examples/heapkit-tour
	cmake --build $(BUILD) -j $(JOBS) --target heapkit-workload
	$(VENV)/bin/heapkit record -o $(BUILD)/espresso.hkt -- $(BUILD)/bench/heapkit-workload espresso 30
	$(VENV)/bin/heapkit stats $(BUILD)/espresso.hkt
	$(VENV)/bin/heapkit replay $(BUILD)/espresso.hkt -a glibc -a lea -a kingsley -a heapkit -n 3
	$(VENV)/bin/heapkit simulate $(BUILD)/espresso.hkt --no-map
	$(VENV)/bin/heapkit replay $(BUILD)/espresso.hkt -n 3 \
	    -a spec:$$($(VENV)/bin/python -c 'import heapkit.dmm as d; print(d.preset_path("BOX"))') \
	    -a spec:$$($(VENV)/bin/python -c 'import heapkit.dmm as d; print(d.preset_path("S10"))')

# Every test, in a release build and in an ASan+UBSan build. ASan's own malloc must return
# NULL on impossible sizes, as glibc does, for the tests of failure paths.
test: python test-release test-asan

test-release: configure
	cmake --build $(BUILD) -j $(JOBS)
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DHEAPKIT_SANITIZE=address,undefined \
	      -DHEAPKIT_BUILD_BENCH=OFF
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 \
	ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS) -LE no-sanitizer

# Long benchmarks (figures go to docs/benchmarks.md): each part of the project adds its
# own bench-* target in mk/*.mk, and `make bench` runs them all.
BENCH_TARGETS :=
-include mk/*.mk

bench: $(BENCH_TARGETS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
