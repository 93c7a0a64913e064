# bench-reap: reaps, regions and obstacks against glibc, talloc, APR pools and
# std::pmr::monotonic_buffer_resource, then the paper's calculator case study. Figures
# go to docs/benchmarks.md ("Reaps, regions and obstacks").
#   make bench-reap [REAP_BENCH_ARGS="--runs 9 --scale 1"]
.PHONY: bench-reap
BENCH_TARGETS += bench-reap
REAP_BENCH_ARGS ?= --runs 9
REAP_BENCH_DIR = $(BUILD)/bench/reap
REAP_CALC_DIR = $(BUILD)/examples/reap-calculator

# Built by CMake when bench/ and examples/ add their subfolders; until then, directly
# against the library CMake built.
bench-reap: configure
	cmake --build $(BUILD) -j $(JOBS) --target heapkit-reap
	@if ninja -C $(BUILD) -t targets all 2>/dev/null | grep -q '^heapkit-reap-bench:'; then \
	  cmake --build $(BUILD) -j $(JOBS) --target heapkit-reap-bench; \
	else \
	  mkdir -p $(REAP_BENCH_DIR) && \
	  $(CXX) -std=c++20 -O3 -DNDEBUG -Iinclude $$(pkg-config --cflags talloc apr-1) bench/reap/reap_bench.cpp \
	    $(BUILD)/src/reap/libheapkit-reap.a $$(pkg-config --libs talloc apr-1) -o $(REAP_BENCH_DIR)/heapkit-reap-bench; \
	fi
	@if ninja -C $(BUILD) -t targets all 2>/dev/null | grep -q '^heapkit-reap-calculator:'; then \
	  cmake --build $(BUILD) -j $(JOBS) --target heapkit-reap-calculator; \
	else \
	  mkdir -p $(REAP_CALC_DIR) && \
	  $(CC) -O2 -Iinclude examples/reap-calculator/calculator.c $(BUILD)/src/reap/libheapkit-reap.a -lstdc++ \
	    -o $(REAP_CALC_DIR)/heapkit-reap-calculator; \
	fi
	$(REAP_BENCH_DIR)/heapkit-reap-bench $(REAP_BENCH_ARGS)
	$(REAP_CALC_DIR)/heapkit-reap-calculator 1000
