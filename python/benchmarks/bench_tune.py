"""heapkit tune on real programs not written in this project (`make bench-tune`). Writes the
"## heapkit tune on real programs" section of docs/benchmarks.md.

Each program runs on inputs this script generates (deterministic), for 0.2-2 s of CPU
time, and is tuned by ``heapkit tune`` with its default budget (the same code the
command runs). For each, from the race on the program itself (every allocator measured in
the same run):

- the recommendation (``--prefer balanced``) and whether a peer measured in the same run
  dominates it (goal: never);
- whether a design the search found is on the measured front and beats every peer on one
  axis (its median below every peer's) while staying within 2% of the best peer on the
  other;
- how far the best design the search found is from beating every peer on both axes: its
  median time over the fastest peer's, its median peak RSS over the lowest peer's.

    python bench_tune.py DOC [--workdir DIR] [--only NAME ...] [--keep] [--quick]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from doc_section import replace_section

from heapkit import race as hr
from heapkit import tune as ht

SECTION = "heapkit tune on real programs"
JQ_FILTER = ('[.[] | select(.score > 20) | {n: .name, t: (.tags | join(",")), s: (.nested.k | add)}] '
             '| group_by(.t | length) | map(length)')


@dataclass(frozen=True)
class Program:
    name: str
    what: str
    command: list[str]
    setup: Callable[[Path], None]  # writes the program's inputs into the directory


def _python(d: Path) -> None:
    (d / "work.py").write_text(
        "import json, random\n"
        "r = random.Random(1)\n"
        "d = {f'k{i}': [r.random() for _ in range(r.randrange(8))] for i in range(30000)}\n"
        "s = json.dumps(d)\n"
        "e = json.loads(s)\n"
        "words = sorted(set(s.split(',')))\n"
        "print(len(s), len(words), sum(len(v) for v in e.values()))\n")


def _sqlite(d: Path) -> None:
    (d / "work.sql").write_text(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, grp INTEGER, payload TEXT);\n"
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 150000)\n"
        "INSERT INTO t SELECT x, printf('name-%08x', (x * 2654435761) % 4294967296), x % 97, "
        "printf('%.*c', 20 + x % 60, 'p') FROM c;\n"
        "CREATE INDEX t_name ON t(name);\n"
        "CREATE INDEX t_grp ON t(grp, name);\n"
        "SELECT grp, count(*), max(length(payload)) FROM t GROUP BY grp ORDER BY 2 DESC, 1 LIMIT 3;\n"
        "SELECT count(DISTINCT substr(name, 1, 9)) FROM t;\n"
        "SELECT a.grp, count(*) FROM t a JOIN t b ON a.name = b.name WHERE a.id % 7 = 0 GROUP BY a.grp "
        "ORDER BY 2 DESC, 1 LIMIT 3;\n")


def _jq(d: Path) -> None:
    r = random.Random(1)
    data = [{"id": i, "name": f"user{r.randrange(10 ** 6)}",
             "tags": [r.choice("abcdefgh") * r.randrange(1, 8) for _ in range(r.randrange(0, 8))],
             "score": r.random() * 100, "nested": {"k": [r.randrange(1000) for _ in range(r.randrange(0, 10))]}}
            for i in range(25000)]
    (d / "data.json").write_text(json.dumps(data))


def _cpp(d: Path) -> None:
    parts = ["#include <algorithm>\n#include <functional>\n#include <map>\n#include <sstream>\n#include <string>\n"
             "#include <vector>\n"]
    for i in range(10):
        parts.append(f"""
struct S{i} {{ std::map<std::string, std::vector<int>> m; std::vector<std::pair<int, std::string>> v; }};
int f{i}(S{i}& s, int k) {{
  for (int j = 0; j < k; ++j) s.m[std::to_string(j * {i + 3})].push_back(j);
  std::sort(s.v.begin(), s.v.end(), [](auto& a, auto& b) {{ return a.second < b.second || (a.second == b.second && a.first < b.first); }});
  std::ostringstream out; for (auto& [key, val] : s.m) out << key << val.size();
  std::function<int(int)> g = [&](int x) {{ return x > 0 ? g(x - 1) + (int)s.m.size() : 0; }};
  return g(k) + (int)out.str().size();
}}
""")
    (d / "work.cpp").write_text("".join(parts))


def _perl(d: Path) -> None:
    (d / "work.pl").write_text(
        "my %h; my @w;\n"
        "for my $i (1..150000) { my $k = sprintf(\"key%07d\", ($i * 7919) % 1000003); $h{$k} .= \"x\" x ($i % 13); "
        "push @w, $k if $i % 3 == 0; }\n"
        "my @s = sort { $h{$a} cmp $h{$b} or $a cmp $b } @w;\n"
        "my $t = join(\",\", @s[0..9999]); my $n = () = $t =~ /key0/g;\n"
        "my %c; $c{length $_}++ for values %h;\n"
        "print scalar(keys %h), \" $n \", join(\",\", map { \"$_:$c{$_}\" } sort { $a <=> $b } keys %c), \"\\n\";\n")


def _node(d: Path) -> None:
    (d / "work.js").write_text(
        "const a = [];\n"
        "for (let i = 0; i < 150000; i++) a.push({k: 'key' + i, v: [i, i * 2, String(i)], s: 'x'.repeat(i % 40)});\n"
        "const s = JSON.stringify(a);\n"
        "const b = JSON.parse(s);\n"
        "const m = new Map(); for (const o of b) m.set(o.k, o.v.length + o.s.length);\n"
        "let t = 0; for (const v of m.values()) t += v;\n"
        "console.log(s.length, m.size, t);\n")


def _git(d: Path) -> None:
    """A repository of 1,000 commits, each changing a few of 60 files (git fast-import)."""
    r = random.Random(2)
    files = {f"src/f{i:03d}.txt": [f"line {j} of file {i}" for j in range(200)] for i in range(60)}
    out = []
    for c in range(1000):
        changed = set()
        for _ in range(8):
            name = r.choice(sorted(files))
            lines = files[name]
            for _ in range(5):
                lines[r.randrange(len(lines))] = f"changed {c} {r.randrange(10 ** 6)}"
            if r.random() < 0.3:
                lines.insert(r.randrange(len(lines)), f"inserted {c}")
            changed.add(name)
        message = f"commit {c}\n"
        out.append(f"commit refs/heads/main\nmark :{c + 1}\ncommitter A U Thor <a@example.com> {1700000000 + c * 60} "
                   f"+0000\ndata {len(message)}\n{message}")
        if c > 0:
            out.append(f"from :{c}\n")
        for name in sorted(files if c == 0 else changed):
            body = "\n".join(files[name]) + "\n"
            out.append(f"M 100644 inline {name}\ndata {len(body.encode())}\n{body}")
        out.append("\n")
    repo = d / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "fast-import", "--quiet"], input="".join(out).encode(), check=True)


PROGRAMS = [
    Program("python", "CPython with PYTHONMALLOC=malloc: a dict of 30,000 lists, a JSON round trip, a sort",
            ["/usr/bin/env", "PYTHONMALLOC=malloc", "/usr/bin/python3", "work.py"], _python),
    Program("sqlite3", "SQLite: 150,000 rows inserted, two indexes, group-by and self-join queries",
            ["sqlite3", ":memory:", ".read work.sql"], _sqlite),
    Program("jq", "jq: a select/map/group_by filter over 25,000 JSON records (4 MB)", ["jq", "-c", JQ_FILTER, "data.json"],
            _jq),
    Program("g++", "GCC compiling a C++ file of maps, sorts and lambdas (-O0): the driver, cc1plus and as",
            ["g++", "-O0", "-c", "work.cpp", "-o", "work.o"], _cpp),
    Program("perl", "Perl: a hash of 150,000 keys grown by string appends, a sort, a regex count", ["perl", "work.pl"],
            _perl),
    Program("node", "Node.js: 150,000 objects, a JSON round trip, a Map", ["node", "work.js"], _node),
    Program("git", "git log -p over 1,000 commits of 60 files", ["git", "-C", "repo", "log", "-p", "--no-color"], _git),
]


@dataclass
class Outcome:
    program: Program
    result: Optional[ht.TuneResult]
    seconds: float
    error: str = ""


def _searched(result: ht.TuneResult) -> set[str]:
    return {d.name for d in result.designs if d.origin == "search"}


def analyse(result: ht.TuneResult) -> dict:
    race = result.program_race
    peers = [s for s in race.standings if s.kind == "peer" and s.runs() and not s.disqualified]
    fastest = min(p.cpu_seconds for p in peers)
    smallest = min(p.peak_rss for p in peers)
    rec = result.recommendation
    dominated_by = [n for n in race.dominated_by(rec.name) if race.standing(n).kind == "peer"]
    front = {s.name for s in race.front()}
    searched = _searched(result)
    raced = [s for s in race.standings if s.name in searched and s.runs() and not s.disqualified]
    one_axis = []
    for s in raced:
        if s.name not in front:
            continue
        if (s.cpu_seconds < fastest and s.peak_rss <= 1.02 * smallest) or \
                (s.peak_rss < smallest and s.cpu_seconds <= 1.02 * fastest):
            one_axis.append(s.name)
    distance = None
    source = "program"
    pool = raced
    if not pool:  # the search's designs never reached the program's race: the trace's, as the next best
        source = "trace"
        trace = result.trace_race
        tpeers = [s for s in trace.standings if s.kind == "peer" and s.runs()]
        pool = [s for s in trace.standings if s.name in searched and s.runs()]
        if pool:
            fastest_t, smallest_t = min(p.cpu_seconds for p in tpeers), min(p.peak_rss for p in tpeers)
            best = min(pool, key=lambda s: max(s.cpu_seconds / fastest_t, s.peak_rss / smallest_t))
            distance = (best.name, best.cpu_seconds / fastest_t, best.peak_rss / smallest_t)
    else:
        best = min(pool, key=lambda s: max(s.cpu_seconds / fastest, s.peak_rss / smallest))
        distance = (best.name, best.cpu_seconds / fastest, best.peak_rss / smallest)
    both = distance is not None and source == "program" and distance[1] <= 1.0 and distance[2] <= 1.0
    glibc = race.standing("glibc")
    return {"recommendation": rec, "dominated_by": dominated_by, "one_axis": one_axis, "distance": distance,
            "distance_source": source, "both": both, "glibc_seconds": glibc.cpu_seconds,
            "fastest_peer": min(peers, key=lambda p: p.cpu_seconds).name,
            "smallest_peer": min(peers, key=lambda p: p.peak_rss).name}


def render(outcomes: list[Outcome], settings: ht.TuneSettings, args) -> str:
    cores = os.cpu_count()
    load = os.getloadavg()[0]
    lines = [f"## {SECTION}", "",
             "Command: `make bench-tune` (`python python/benchmarks/bench_tune.py docs/benchmarks.md`; one program: "
             "`--only NAME`). Each program is tuned by `heapkit tune` with its default budget (search: population "
             f"{settings.population}, {settings.generations} generations, on the first million operations of a trace of "
             f"two million or more; up to {settings.designs} designs of the "
             f"front and LEA built; races of {settings.looks_text()}, {settings.trace_budget:.0f} s on the trace and "
             f"{settings.program_budget:.0f} s on the program at most), on inputs the script generates, on this "
             f"{cores}-core machine shared with other engineers (load {load:.1f} when the section was written; "
             f"{platform.platform(terse=True)}). Times are CPU time (user + system) of the whole command, peak RSS "
             "that of its largest process; ratios are medians of paired runs in the same race. The reports are in "
             f"`{args.shown_workdir}/NAME/tune/report.html`.", ""]
    lines += ["| program | what it runs | tuned on | glibc CPU time | recommended (balanced) | time, RSS / glibc | "
              "dominated by a peer? | searched design on the front, beating every peer on one axis (within 2% on the "
              "other) | best searched design: time / fastest peer, RSS / lowest peer | tune's wall time |",
              "|---|---|---|---:|---|---|---|---|---|---:|"]
    never, one, both, done = 0, 0, 0, 0
    for o in outcomes:
        if o.result is None:
            lines.append(f"| {o.program.name} | {o.program.what} | failed: {o.error} | | | | | | | {o.seconds:.0f} s |")
            continue
        r = o.result
        a = analyse(r)
        done += 1
        rec = a["recommendation"]
        never += not a["dominated_by"]
        one += bool(a["one_axis"])
        both += a["both"]
        sel = r.selection
        processes = sum(len(p.processes) for p in sel.programs)
        tuned = f"{Path(sel.executable).name}, {sel.events:,} ops" + (f" (1 of {processes} processes)" if processes > 1 else "")
        kind = "design" if rec.kind == "design" else "peer"
        distance = "-"
        if a["distance"]:
            name, t, m = a["distance"]
            distance = f"{name}: {t:.2f}x, {m:.2f}x" + (" (trace)" if a["distance_source"] == "trace" else "")
        lines.append(f"| {o.program.name} | {o.program.what} | {tuned} | {a['glibc_seconds']:.3f} s | {rec.name} ({kind}) | "
                     f"{rec.time_ratio:.2f}, {rec.rss_ratio:.2f} | "
                     f"{'yes: ' + ', '.join(a['dominated_by']) if a['dominated_by'] else 'no'} | "
                     f"{', '.join(a['one_axis']) if a['one_axis'] else 'no'} | {distance} | {o.seconds:.0f} s |")
    lines += ["",
              f"- The recommendation is never dominated by a peer measured in the same run: **{never} of {done}** "
              f"(goal: all).",
              f"- A design found by the search is on the measured front and beats every peer on one axis, within 2% on "
              f"the other: **{one} of {done}** (goal: at least half).",
              f"- A design found by the search beats every peer on both axes (time ≤ the fastest peer's, RSS ≤ the "
              f"lowest peer's): **{both} of {done}** (goal: at least half). The last column says how far the best one "
              "is: both ratios at or below 1.00 would meet it.",
              ""]
    for o in outcomes:
        if o.result is None:
            continue
        r = o.result
        race = r.program_race
        rows = sorted((s for s in race.standings if s.runs()), key=lambda s: s.cpu_seconds)
        front = {s.name for s in race.front()}
        cells = ", ".join(f"{s.name}{'*' if s.name in front else ''} {s.cpu_seconds:.3f} s / {s.peak_rss / 2**20:.1f} MiB"
                          for s in rows)
        stages = ", ".join(f"{k} {v:.0f} s" for k, v in r.stage_seconds.items() if v >= 0.5)
        missing = f"; not installed: {', '.join(r.missing_peers)}" if r.missing_peers else ""
        rho = "" if math.isnan(r.agreement) else f"; trace and program rank the times with Spearman ρ = {r.agreement:.2f}"
        lines.append(f"- **{o.program.name}** ({race.rounds} rounds{missing}{rho}): {cells} (* on the measured front). "
                     f"Stages: {stages}.")
    lines += ["",
              "The design space holds the 2010 paper's mechanisms and libheapkit.so's own: `page_segregated` "
              "(headerless page-segregated size classes, the class list fitted to the trace, the pool, purge and "
              "large-block cache as values; built as the thread-aware heap, or for a range of small sizes in front of "
              "another allocator) and `adaptive_lea`, and placement by lifetime (`short_lived`: the sizes whose "
              "objects the trace shows to die young in an area of their own, docs/dmm-spec.md); the search starts "
              "from the presets HKS and ALEA (libheapkit.so's single-thread path and libheapkit-lea.so's heap) and the "
              "mixed designs (the churn page-segregated, the rest AdaptiveLeaHeap, by size or by lifetime) and "
              "optimises the time model's predicted time (\"Predicting replay time\"); tune builds, besides the "
              "front's balance and extremes, the design nearest to beating HKS's time and the least of ALEA's "
              "footprint and glibc's replayed one and the two flanking that goal, and races on the program those "
              "nearest to beating every peer on the trace. Every contender of a race is measured in every round "
              "while the budget allows (a dominated one is set aside, and re-admitted if later rounds undo the "
              "verdict), so that the medians above are over the same rounds. The recommendation stays "
              "honest regardless: a peer is recommended when no built design beats it measurably."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("doc", type=Path)
    parser.add_argument("--workdir", type=Path, default=Path("build/bench-tune"))
    parser.add_argument("--only", nargs="*", default=None, help="program names (default: all)")
    parser.add_argument("--keep", action="store_true",
                        help="a program whose tune finished in WORKDIR (same settings) is not run again: its results "
                             "are read back, its wall time the sum of its stages' (to finish a run that stopped)")
    parser.add_argument("--quick", action="store_true", help="a tiny budget, to try the script; prints the section")
    args = parser.parse_args()
    settings = ht.TuneSettings()
    if args.quick:
        settings = ht.TuneSettings(population=8, generations=2, designs=1, finalists=1, min_rounds=6, max_rounds=6,
                                   trace_budget=30, program_budget=60)
    chosen = [p for p in PROGRAMS if args.only is None or p.name in args.only]
    missing = [p.name for p in chosen if shutil.which(p.command[0]) is None]
    if missing:
        sys.exit(f"not installed: {', '.join(missing)}")
    args.shown_workdir = args.workdir
    args.workdir = args.workdir.resolve()
    outcomes = []
    home = Path.cwd()
    for program in chosen:
        folder = args.workdir / program.name
        finished = args.keep and ht.finished(folder / "tune", settings)
        if not finished:
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            program.setup(folder)
        started = time.monotonic()
        os.chdir(folder)  # the command runs where its inputs are, as a user would run it
        try:
            with tempfile.TemporaryDirectory() as cache:
                result = ht.tune(program.command, folder / "tune", settings, cache=Path(cache) / "cache.sqlite",
                                 progress=lambda stage, message, n=program.name: print(f"[{n}] {stage}: {message}",
                                                                                       flush=True))
            seconds = sum(result.stage_seconds.values()) if finished else time.monotonic() - started
            outcomes.append(Outcome(program, result, seconds))
            print(f"[{program.name}] {result.recommendation.line} ({time.monotonic() - started:.0f} s)", flush=True)
        except Exception as error:  # noqa: BLE001 - the table says which program failed, and why
            outcomes.append(Outcome(program, None, time.monotonic() - started, str(error).splitlines()[0]))
            print(f"[{program.name}] failed: {error}", flush=True)
        finally:
            os.chdir(home)
    section = render(outcomes, settings, args)
    print(section)
    if not args.quick and args.only is None:
        replace_section(args.doc, SECTION, section)


if __name__ == "__main__":
    main()
