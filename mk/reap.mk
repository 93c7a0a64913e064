# bench-reap: reaps, regions and obstacks against glibc, talloc, APR pools and
# std::pmr::monotonic_buffer_resource, then the paper's calculator case study. Figures
# go to docs/benchmarks.md ("Reaps, regions and obstacks").
#   make bench-reap [REAP_BENCH_ARGS="--runs 9 --scale 1"]
# Both programs are CMake targets (bench/reap/, examples/reap-calculator/); the
# benchmark needs talloc and apr-1 (scripts/deps/reap.txt), which `make deps` installs.
.PHONY: bench-reap
BENCH_TARGETS += bench-reap
REAP_BENCH_ARGS ?= --runs 9

bench-reap: configure
	cmake --build $(BUILD) -j $(JOBS) --target heapkit-reap-bench heapkit-reap-calculator
	$(BUILD)/bench/reap/heapkit-reap-bench $(REAP_BENCH_ARGS)
	$(BUILD)/examples/reap-calculator/heapkit-reap-calculator 1000
