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

# The time model against real replays: Spearman per trace of predicted_ns (leave one trace
# out) and of work alone, over the presets and random designs on 9 traces (the bench
# workloads and real programs); writes the "## Predicting replay time" section of
# docs/benchmarks.md and the shipped model, python/heapkit/time_model.json.
#   make bench-timemodel [TIMEMODEL_BENCH_ARGS="--runs 7 --designs 60"]
BENCH_TARGETS += bench-timemodel
.PHONY: bench-timemodel
TIMEMODEL_BENCH_ARGS ?= --runs 11 --designs 44 --max-ops 1500000

bench-timemodel: configure python
	cmake --build $(BUILD) -j $(JOBS) --target heapkit-workload
	$(VENV)/bin/python python/benchmarks/bench_timemodel.py $(BUILD)/bench/heapkit-workload docs/benchmarks.md \
	    $(TIMEMODEL_BENCH_ARGS) --write-default
