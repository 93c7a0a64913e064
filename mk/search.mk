# The design search and heapkit tune: search quality on four traces (three of this
# project's workloads and CPython parsing a package), convergence, GE against random
# designs, the 60 x 100 speed target, compiled against run-time-configured designs, Ray
# with 1 and 2 workers, tune's stages and the real program's gains. Writes the "## Design
# search and heapkit tune" section of docs/benchmarks.md. Long (tens of minutes).
#   make bench-search [SEARCH_BENCH_ARGS="--generations 100"]
BENCH_TARGETS += bench-search
.PHONY: bench-search
SEARCH_BENCH_ARGS ?=

bench-search: configure python
	cmake --build $(BUILD) -j $(JOBS) --target heapkit-workload
	$(VENV)/bin/python python/benchmarks/bench_search.py $(BUILD)/bench/heapkit-workload docs/benchmarks.md \
	    $(SEARCH_BENCH_ARGS)
