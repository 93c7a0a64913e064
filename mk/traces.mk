# Trace benchmarks: recording overhead (against unrecorded runs, heaptrack, mtrace), bytes
# per operation, decoding speed. Writes the "## Traces" section of docs/benchmarks.md.
BENCH_TARGETS += bench-traces
.PHONY: bench-traces
bench-traces: configure python
	cmake --build $(BUILD) -j $(JOBS) --target heapkit-workload
	$(VENV)/bin/python python/benchmarks/bench_traces.py $(BUILD)/bench/heapkit-workload docs/benchmarks.md
