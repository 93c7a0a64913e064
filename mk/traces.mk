# Trace benchmarks: recording overhead (against unrecorded runs, heaptrack, mtrace), bytes
# per operation, decoding speed, the trace loop's own speed. Writes the "## Traces" section
# of docs/benchmarks.md.
BENCH_TARGETS += bench-traces
.PHONY: bench-traces
bench-traces: configure python
	cmake --build $(BUILD) -j $(JOBS) --target heapkit-workload heapkit-loop-speed
	$(VENV)/bin/python python/benchmarks/bench_traces.py $(BUILD)/bench/heapkit-workload docs/benchmarks.md \
	    --loop-speed $(BUILD)/bench/sim/heapkit-loop-speed
