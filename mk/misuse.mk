# The misuse table of docs/benchmarks.md ("Misuse: what each allocator stops"): every case
# of tests/hardening/misuse.c in a child under glibc, the peers and every heapkit preload
# library, printed as markdown. Exits non-zero when libheapkit-secure.so (the last column)
# stops fewer cases than glibc (the first).
.PHONY: bench-misuse
BENCH_TARGETS += bench-misuse

SYSTEM_LIBS ?= /usr/lib/x86_64-linux-gnu

bench-misuse: configure
	cmake --build $(BUILD) -j $(JOBS) --target heapkit_misuse heapkit-scalable heapkit-kingsley heapkit-lea heapkit-secure
	$(BUILD)/tests/hardening/heapkit_misuse --table glibc= jemalloc=$(SYSTEM_LIBS)/libjemalloc.so.2 \
	    mimalloc=$(SYSTEM_LIBS)/libmimalloc.so.2 tcmalloc=$(SYSTEM_LIBS)/libtcmalloc_minimal.so.4 \
	    libheapkit.so=$(abspath $(BUILD))/src/preload/libheapkit.so \
	    libheapkit-kingsley.so=$(abspath $(BUILD))/src/preload/libheapkit-kingsley.so \
	    libheapkit-lea.so=$(abspath $(BUILD))/src/preload/libheapkit-lea.so \
	    libheapkit-secure.so=$(abspath $(BUILD))/src/preload/libheapkit-secure.so
