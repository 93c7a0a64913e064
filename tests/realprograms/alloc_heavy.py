# Allocation-heavy Python: dicts, strings, lists, bytes and threads. Deterministic output,
# compared line by line between glibc's malloc and a heapkit allocator.
import hashlib
import threading


def churn(seed, rounds):
    table = {}
    digest = hashlib.sha256()
    for i in range(rounds):
        key = f"k{seed}-{i * 7919 % 100003}"
        table[key] = ("x" * (i % 300)) + str(i)
        if i % 3 == 0:
            table.pop(f"k{seed}-{(i // 2) * 7919 % 100003}", None)
        if i % 1000 == 0:
            blob = bytes(range(256)) * (1 + i % 64)
            digest.update(blob)
            digest.update(" ".join(sorted(table)[:50]).encode())
    return len(table), digest.hexdigest()


results = {}


def worker(seed):
    results[seed] = churn(seed, 40000)


threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
for seed in sorted(results):
    print(seed, *results[seed])

# Big strings and lists that outgrow any small-object pool.
words = [str(i) * (i % 17) for i in range(200000)]
text = ",".join(words)
print(len(text), hashlib.md5(text.encode()).hexdigest())
nested = [[j for j in range(i % 50)] for i in range(50000)]
print(sum(map(len, nested)))
