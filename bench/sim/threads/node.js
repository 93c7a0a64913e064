// Allocation-heavy JS: V8's own helper threads (GC, compiler) allocate beside the main thread.
let keep = [];
for (let r = 0; r < 40; r++) {
  const m = new Map();
  for (let i = 0; i < 20000; i++) m.set('k' + i * r, { a: [i, r, 'x'.repeat(i % 50)], s: JSON.stringify({ i, r }) });
  keep.push(m);
  if (keep.length > 4) keep.shift();
}
console.log(keep.length);
