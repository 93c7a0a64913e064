# The DMM simulator's benchmarks: speed against the real replay, memory on a short and a
# long trace, the paper's experiment, and the cost model's rank correlation. Writes the
# "## DMM simulator" section of docs/benchmarks.md.
#   make bench-sim [SIM_BENCH_ARGS="--runs 5 --designs 40"]
BENCH_TARGETS += bench-sim
.PHONY: bench-sim
SIM_BENCH_ARGS ?= --runs 3 --designs 30

bench-sim: configure python
	cmake --build $(BUILD) -j $(JOBS) --target heapkit-workload heapkit-sim-speed
	$(VENV)/bin/python python/benchmarks/bench_sim.py $(BUILD)/bench/heapkit-workload \
	    $(BUILD)/bench/sim/heapkit-sim-speed docs/benchmarks.md $(SIM_BENCH_ARGS)
