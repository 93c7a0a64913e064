# Drop-in malloc benchmarks: every workload under glibc, jemalloc, mimalloc, tcmalloc and
# every heapkit preload library; writes the "## Drop-in malloc" section of
# docs/benchmarks.md. See bench/malloc/run_bench.py.
.PHONY: bench-malloc
BENCH_TARGETS += bench-malloc

bench-malloc: configure
	cmake --build $(BUILD) -j $(JOBS) --target heapkit-kingsley heapkit-lea heapkit-scalable heapkit-mt-workload heapkit-workload \
	    heapkit-unhardened-scalable heapkit-unhardened-lea heapkit-unhardened-kingsley \
	    heapkit-secure heapkit_misuse
	python3 bench/malloc/run_bench.py --build $(BUILD) --doc docs/benchmarks.md
