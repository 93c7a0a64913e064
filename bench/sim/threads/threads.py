# Eight threads, each keeping its own working set (dicts of lists and strings) that it
# churns, running concurrently under the GIL (switching every 0.5 ms).
import sys, threading, zlib
sys.setswitchinterval(0.0005)
out = [0] * 8
def work(k):
    d = {}
    for i in range(60000):
        d[i % 2003] = [str(i * j) for j in range(i % 13)] + [bytes(i % 300)]
    out[k] = zlib.crc32(repr(sorted(d.items())[:50]).encode())
ts = [threading.Thread(target=work, args=(k,)) for k in range(8)]
[t.start() for t in ts]; [t.join() for t in ts]
print(out)
