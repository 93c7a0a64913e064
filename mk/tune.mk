# heapkit tune on real programs not written in this project (CPython, SQLite, jq, GCC, Perl,
# Node.js, git), on inputs the script generates, each tuned with tune's default budget (up to
# ten minutes each on a 2-core machine): the recommendation, whether a peer measured in the
# same run dominates it, and how far the designs the search found are from beating every
# peer. Writes the "## heapkit tune on real programs" section of docs/benchmarks.md; the
# reports stay in $(BUILD)/bench-tune/NAME/tune/. Long (about an hour).
#   make bench-tune [TUNE_BENCH_ARGS="--only jq sqlite3"]   (--only prints the table, writes nothing)
BENCH_TARGETS += bench-tune
.PHONY: bench-tune
TUNE_BENCH_ARGS ?=

bench-tune: configure python
	$(VENV)/bin/python python/benchmarks/bench_tune.py docs/benchmarks.md --workdir $(BUILD)/bench-tune \
	    $(TUNE_BENCH_ARGS)
