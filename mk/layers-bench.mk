# `make bench-layers`: the figures of docs/benchmarks.md, section "Heap layers".
#  1. abstraction penalty in time (Google Benchmark, medians of 15 interleaved repetitions)
#  2. abstraction penalty in instructions (callgrind, exact)
#  3. KingsleyHeap, CoalescingKingsleyHeap and LeaHeap against glibc on the workloads
#     (medians of LAYERS_RUNS fresh processes per allocator and workload)
LAYERS_RUNS ?= 7
LAYERS_BENCH_TARGETS := heapkit-bench-abstraction-penalty heapkit-pair-instructions heapkit-bench-layers heapkit-workload

.PHONY: bench-layers
bench-layers: configure
	cmake --build $(BUILD) -j $(JOBS) --target $(LAYERS_BENCH_TARGETS)
	$(BUILD)/bench/heapkit-bench-abstraction-penalty
	$(BUILD)/bench/heapkit-pair-instructions
	$(BUILD)/bench/heapkit-bench-layers --runs $(LAYERS_RUNS)

BENCH_TARGETS += bench-layers
