# Emitted against composed by hand: each preset that describes a shipped library (HKS,
# ALEA, KNG) built by `heapkit build` and measured against that library (libheapkit.so,
# libheapkit-lea.so, libheapkit-kingsley.so) on real programs (CPython, sqlite3, jq, perl):
# the replay of their traces and the programs themselves with each preloaded (CPU time,
# interleaved rounds) and callgrind's instruction counts. Writes the "## Emitted against
# composed by hand" section of docs/benchmarks.md. About 15 minutes on a 2-core machine.
#   make bench-emit [EMIT_BENCH_ARGS="--runs 21"]   (--only NAME prints the table, writes nothing)
BENCH_TARGETS += bench-emit
.PHONY: bench-emit
EMIT_BENCH_ARGS ?=

bench-emit: configure python
	$(VENV)/bin/python python/benchmarks/bench_emit.py docs/benchmarks.md --workdir $(BUILD)/bench-emit \
	    $(EMIT_BENCH_ARGS)
