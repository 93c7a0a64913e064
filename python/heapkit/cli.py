"""The ``heapkit`` command: argument parsing, progress bars and tables over the API."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

import heapkit
from heapkit import convert as _convert
from heapkit.race import DEFAULT_PEERS
from heapkit.replay import ALLOCATORS, ReplayError
from heapkit.simulator import load_energy_model

console = Console(stderr=True)
out = Console()


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _ns(n: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} ns"


def _byte_progress(description: str) -> Progress:
    return Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                    console=console, transient=True, disable=not console.is_terminal)


def _fail(message: str) -> None:
    console.print(Text(f"heapkit: {message}", style="red"), highlight=False, soft_wrap=True)
    sys.exit(1)


# What bad input, a bad output path or an unusable program can raise below the commands:
# each becomes one line and exit status 1. Anything else is a bug and keeps its traceback.
_INPUT_ERRORS = (heapkit.TraceError, heapkit.SpecError, heapkit.SimulationError, ReplayError, OSError, ValueError,
                 MemoryError, RuntimeError)


def _describe(error: BaseException) -> str:
    if isinstance(error, MemoryError):
        return "out of memory (the input asks for more than this machine has)"
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        return f"{error.filename}: {error.strerror}"
    return str(error) or type(error).__name__


class _Commands(click.Group):
    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise  # click's own (some derive from RuntimeError)
        except _INPUT_ERRORS as error:
            _fail(_describe(error))


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(heapkit.__version__, prog_name="heapkit")
def main() -> None:
    """heapkit: record a program's allocations once, inspect and replay them, simulate memory
    manager designs on them, search for the best, and build it as a real allocator.
    `heapkit tune -- CMD ARGS` does it all for a program."""


@main.command(context_settings={"ignore_unknown_options": True})
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Trace of the command's process (its last image) [default: <command>.hkt]. "
                   "Other images: <stem>.<pid>.hkt as a process began, <stem>.<pid>-<n>.hkt after its n-th exec.")
@click.option("--keep-spool", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep the recorder's raw per-process spools in this directory.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def record(output: Path | None, keep_spool: Path | None, command: tuple[str, ...]) -> None:
    """Run COMMAND with every malloc-family call recorded (threads, forks and execs included).

    Use -- before the command:

    \b
        heapkit record -o ls.hkt -- ls -l

    heapkit exits with the command's exit status (128+N if signal N ended it).
    """
    if output is None:
        output = Path(Path(command[0]).name + ".hkt")
    with Progress(console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("merging spools", total=None, visible=False)

        def on_merge(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total, visible=True)

        result = heapkit.record(command, output, keep_spool, on_merge)
    shown = result.traces if len(result.traces) <= 8 else [t for t in result.traces if t is result.main]
    for t in shown:
        notes = []
        if t.unknown_frees:
            notes.append(f"{t.unknown_frees} frees of memory from before recording")
        if t.truncated_records:
            notes.append(f"{t.truncated_records} records cut short")
        note = f" ({'; '.join(notes)})" if notes else ""
        console.print(f"{t.path}: pid {t.pid}, {t.events:,} operations, {t.threads} threads, "
                      f"{_bytes(t.bytes)}{note}", highlight=False, markup=False)
    if not any(t.events for t in result.traces):
        console.print("the program made no allocations: its trace is empty", highlight=False, markup=False)
    if len(shown) < len(result.traces):
        others = [t for t in result.traces if t is not result.main]
        console.print(f"and {len(others)} traces of other processes ({sum(t.events for t in others):,} operations), "
                      f"e.g. {others[0].path}", highlight=False, markup=False)
    if result.returncode < 0:
        console.print(f"[yellow]the command was ended by signal {-result.returncode}[/yellow]")
        sys.exit(128 - result.returncode)
    sys.exit(result.returncode)


@main.command()
@click.argument("input", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True, help="The file to write.")
@click.option("--from", "from_", type=click.Choice(_convert.LOG_FORMATS), default=None,
              help="Format of a log INPUT [default: detected].")
@click.option("--to", type=click.Choice(_convert.EXPORT_FORMATS), default=None,
              help="Format to write when INPUT is a heapkit trace [default: text]; heaptrack is the "
                   "file heaptrack_print and heaptrack_gui read.")
@click.option("--lenient", is_flag=True, help="Skip frees of unknown addresses, and keep the later time where a text log's time "
                   "goes backwards, instead of failing.")
def convert(input: Path, output: Path, from_: str | None, to: str | None, lenient: bool) -> None:
    """Convert a log (text, mtrace, heaptrack raw or interpreted; .gz/.xz/.zst too) into a
    heapkit trace, or a heapkit trace into a text, mtrace or heaptrack log (heaptrack's
    interpreted file, for heaptrack_print and heaptrack_gui; name it .zst or .gz to compress)."""
    with _byte_progress("converting") as bar:
        task = bar.add_task("converting", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        # Both write OUTPUT only once the conversion has succeeded.
        if _convert.is_trace(input):
            if from_:
                _fail(f"{input} is already a heapkit trace; --from applies to logs")
            n = heapkit.export_log(input, output, to or "text", progress)
            summary = f"{n:,} operations"
        else:
            if to:
                _fail(f"{input} is a log; it converts to a heapkit trace (--to applies to traces)")
            s = heapkit.import_log(input, output, from_, lenient, progress)
            summary = f"{s['events']:,} operations, {s['objects']:,} objects, {_bytes(s['bytes_written'])}"
            if s["unknown_frees"]:
                summary += f", {s['unknown_frees']:,} frees of unknown addresses skipped"
            if s["reused_addresses"]:
                summary += f", {s['reused_addresses']:,} allocations at live addresses"
    console.print(f"{output}: {summary}", highlight=False, markup=False)


def _sparkline(values: list[int], width: int = 60) -> str:
    if not values:
        return ""
    # Take the largest value in each column so the peak stays visible.
    columns = [max(values[i * len(values) // width:(i + 1) * len(values) // width] or [0])
               for i in range(min(width, len(values)))]
    top = max(columns) or 1
    blocks = " ▁▂▃▄▅▆▇█"
    return "".join(blocks[round(v / top * 8)] for v in columns)


@main.command()
@click.argument("trace", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON.")
@click.option("--top", type=click.IntRange(1, 1000), default=10, show_default=True, help="How many frequent sizes, and busiest threads, to list.")
def stats(trace: Path, as_json: bool, top: int) -> None:
    """Profile a trace: objects, bytes, peaks, sizes, lifetimes, threads, live bytes over time."""
    with _byte_progress("reading") as bar:
        task = bar.add_task("reading", total=None)
        s = heapkit.stats(trace, top_sizes=top, progress=lambda d, t: bar.update(task, completed=d, total=t))
    if as_json:
        # Plain json: rich's highlighting takes minutes on a trace with 100 000 threads.
        click.echo(json.dumps(s.to_dict(), default=str, indent=2))
        return

    summary = Table(title=escape(f"{trace}  ({s.header.source}, pid {s.header.pid}: {s.header.command})"),
                    show_header=False)
    summary.add_column(style="bold")
    summary.add_column(justify="right")
    rows = [
        ("objects", f"{s.objects:,}"),
        ("total bytes", f"{s.total_bytes:,} ({_bytes(s.total_bytes)})"),
        ("max bytes in use", f"{s.max_live_bytes:,} ({_bytes(s.max_live_bytes)})"),
        ("max objects in use", f"{s.max_live_objects:,}"),
        ("average size", f"{s.average_size:,.1f}"),
        ("sizes", f"{s.min_size:,} .. {s.max_size:,}, {s.distinct_sizes:,} distinct"),
        ("total / max ratio", f"{s.total_to_max_ratio:,.2f}"),
        ("memory operations", f"{s.events:,}"),
        ("  malloc / calloc / realloc / aligned", f"{s.mallocs:,} / {s.callocs:,} / {s.reallocs:,} / {s.aligned:,}"),
        ("  free", f"{s.frees:,}"),
        ("never freed", f"{s.end_live_objects:,} objects, {s.end_live_bytes:,} bytes"),
        ("lifetime (operations)", f"mean {s.lifetime_events_mean:,.1f}, median ≤ {s.lifetime_events_median:,}"),
        ("lifetime (time)", f"mean {_ns(s.lifetime_ns_mean)}"),
        ("duration", _ns(s.duration_ns)),
        ("trace size", f"{_bytes(s.trace_bytes)}, {s.bytes_per_event:.2f} bytes per operation"),
    ]
    for k, v in rows:
        summary.add_row(k, v)
    out.print(summary)

    hist = Table(title="object sizes")
    hist.add_column("size", justify="right")
    hist.add_column("objects", justify="right")
    hist.add_column("")
    peak = max(s.size_histogram) or 1
    for b, n in enumerate(s.size_histogram):
        if n:
            label = "0" if b == 0 else f"{1 << (b - 1):,} .. {(1 << b) - 1:,}"
            hist.add_row(label, f"{n:,}", "█" * max(1, round(30 * n / peak)))
    frequent = Table(title="most frequent sizes")
    frequent.add_column("size", justify="right")
    frequent.add_column("objects", justify="right")
    frequent.add_column("share", justify="right")
    for size, n in s.top_sizes:
        frequent.add_row(f"{size:,}", f"{n:,}", f"{100 * n / max(s.objects, 1):.1f}%")
    lifetimes = Table(title="lifetimes (operations between allocation and free)")
    lifetimes.add_column("lifetime", justify="right")
    lifetimes.add_column("objects", justify="right")
    for b, n in enumerate(s.lifetime_events_histogram):
        if n:
            lifetimes.add_row("0" if b == 0 else f"{1 << (b - 1):,} .. {(1 << b) - 1:,}", f"{n:,}")
    threads = Table(title="threads")
    for column in ("thread", "OS tid", "allocations", "frees", "bytes", "frees of others' objects"):
        threads.add_column(column, justify="right")
    # The busiest --top threads: a table of every thread would not be read, and drawing one
    # of 100 000 rows takes minutes (--json has them all).
    busiest = sorted(range(len(s.threads)), key=lambda i: -(s.threads[i].allocations + s.threads[i].frees))[:top]
    for i in sorted(busiest):
        t = s.threads[i]
        threads.add_row(str(i), str(t.os_tid), f"{t.allocations:,}", f"{t.frees:,}", f"{t.bytes:,}", f"{t.remote_frees:,}")
    captions = []
    if len(s.threads) > len(busiest):
        captions.append(f"the {len(busiest)} busiest of {len(s.threads):,} threads (--top; --json lists all)")
    if s.concurrent_allocating_threads >= 2:
        captions.append(f"{s.concurrent_allocating_threads} threads allocate at once: the search's designs get a heap "
                        "per thread (docs/search.md)")
    threads.caption = "; ".join(captions) or None
    for table in (hist, frequent, lifetimes, threads):
        out.print(table)
    out.print("[bold]live bytes over time[/bold] (peak "
              f"{_bytes(s.max_live_bytes)} at operation {s.max_live_bytes_event:,})")
    out.print(_sparkline([p[2] for p in s.live_over_time]))


@main.command()
@click.argument("trace", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-a", "--allocator", "allocators", multiple=True, default=("glibc",), show_default=True,
              help=f"{', '.join(ALLOCATORS)}, a path to a malloc .so, or spec:FILE (a DMM design run as a real "
                   "allocator); repeat to compare.")
@click.option("-n", "--runs", type=click.IntRange(min=1), default=5, show_default=True,
              help="Fresh processes per allocator; the table shows medians.")
@click.option("--no-touch", is_flag=True, help="Do not write to allocated memory (by default one byte per page).")
@click.option("--json", "as_json", is_flag=True, help="Print every run as JSON.")
def replay(trace: Path, allocators: tuple[str, ...], runs: int, no_touch: bool, as_json: bool) -> None:
    """Replay TRACE on real allocators (LD_PRELOAD, no application code): time per operation
    and peak footprint, medians of RUNS fresh processes."""
    results = []
    with Progress(console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("replaying", total=runs * len(allocators))
        for name in allocators:
            bar.update(task, description=escape(f"replaying on {name}"))
            results.append(heapkit.replay(trace, name, runs, not no_touch, lambda d, t: bar.advance(task)))
    if as_json:
        click.echo(json.dumps([{"allocator": r.allocator, "library": str(r.library) if r.library else None,
                                     "operations": r.operations, "max_live_bytes": r.max_live_bytes,
                                     "runs": [vars(x) for x in r.runs]} for r in results], indent=2))
        return
    table = Table(title=escape(f"{trace}: {results[0].operations:,} operations, peak live "
                               f"{_bytes(results[0].max_live_bytes)} (medians of {runs} runs)"))
    designs = any(x.heap_peak_bytes_held is not None for r in results for x in r.runs)
    for column in ("allocator", "time", "ns / op", "footprint", "footprint / live", "failed") + (
            ("footprint (design)",) if designs else ()):
        table.add_column(column, justify="right")
    for r in results:
        held = [x.heap_peak_bytes_held for x in r.runs if x.heap_peak_bytes_held is not None]
        table.add_row(escape(r.allocator), f"{r.median_seconds * 1e3:,.2f} ms", f"{r.median_ns_per_op:.1f}",
                      _bytes(r.median_footprint_bytes), f"{r.fragmentation:.2f}",
                      str(max(x.failed_allocations for x in r.runs)),
                      *((f"{held[0]:,}" if held else "-",) if designs else ()))
    out.print(table)


def _specs_from(specs: tuple[str, ...], presets: tuple[str, ...]) -> list[heapkit.Spec]:
    chosen = [heapkit.load_spec(s) for s in specs] + [heapkit.preset(p) for p in presets]
    return chosen or [heapkit.preset(p) for p in heapkit.PRESETS]


@main.command()
@click.argument("trace", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-s", "--spec", "specs", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="A DMM spec file (docs/dmm-spec.md); repeat to compare.")
@click.option("-p", "--preset", "presets", multiple=True, type=click.Choice(heapkit.PRESETS, case_sensitive=False),
              help="A shipped design; repeat to compare. With neither --spec nor --preset: every preset.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write every metric, footprint over time and the DMM maps to this file.")
@click.option("--energy", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="A JSON file overriding the energy model's parameters (docs/simulator.md).")
@click.option("--reserve", type=click.IntRange(min=1), default=64, show_default=True,
              help="GiB of address space reserved for each design's simulated heap.")
@click.option("-j", "--threads", type=click.IntRange(min=1), default=None, help="Designs simulated at once (default: cores).")
@click.option("--map/--no-map", "show_map", default=True, show_default=True, help="Print each design's DMM map.")
@click.option("--time-model", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="A time model (`heapkit calibrate` writes one; default: $HEAPKIT_TIME_MODEL, else the shipped one).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write an HTML report (profile, designs, footprint over time, DMM maps).")
def simulate(trace: Path, specs: tuple[str, ...], presets: tuple[str, ...], json_path: Path | None,
             energy: Path | None, reserve: int, threads: int | None, show_map: bool, time_model: Path | None,
             report_path: Path | None) -> None:
    """Simulate DMM designs on TRACE: work, metadata accesses, footprint, fragmentation and
    energy of each, and the paper's comparison normalised to Kingsley (KNG, simulated too
    when not asked for)."""
    designs = _specs_from(specs, presets)
    baseline_added = not any(d.name == "KNG" for d in designs)
    if baseline_added:
        designs.append(heapkit.preset("KNG"))
    model = load_energy_model(energy)
    try:
        times = heapkit.timemodel.load(time_model)
    except ValueError as error:
        _fail(str(error))
    size = trace.stat().st_size or 1
    with Progress("[progress.description]{task.description}", BarColumn(), TimeRemainingColumn(), console=console,
                  transient=True, disable=not console.is_terminal) as bar:
        tasks = [bar.add_task(escape(f"simulating {d.name}"), total=size) for d in designs]
        results = heapkit.simulate(trace, designs, energy=model, reserve_bytes=reserve << 30, threads=threads,
                                   time_model=times,
                                   progress=lambda i, done, total: bar.update(tasks[i], completed=done, total=total))
    if json_path is not None:
        json_path.write_text(json.dumps({"trace": str(trace), "energy_model": model, "time_model": times.to_dict(),
                                         "results": [r.to_dict() for r in results]}, indent=1))
    first = results[0]
    table = Table(title=escape(f"{trace}: {first.events:,} operations, peak live {_bytes(first.max_live_bytes)}"))
    for column in ("design", "predicted time", "work", "accesses", "L1/L2/TLB misses", "page faults", "footprint",
                   "frag. int/ext", "energy", "failed", "sim events/s"):
        table.add_column(column, justify="right")
    for r in results:
        table.add_row(escape(r.name), _ns(r.predicted_ns), f"{r.work:,}", f"{r.accesses:,}",
                      f"{r.l1_misses:,} / {r.l2_misses:,} / {r.tlb_misses:,}", f"{r.pages_touched:,}",
                      _bytes(r.peak_footprint),
                      f"{r.internal_fragmentation:.0%} / {r.external_fragmentation:.0%}", f"{r.energy_nj / 1e6:,.3f} mJ",
                      str(r.failed), f"{r.events_per_second / 1e6:.1f} M")
    out.print(table)
    normalized = Table(title="normalised to KNG (the paper's Figures 7-9)" + (" — KNG added as the baseline"
                                                                               if baseline_added else ""))
    for column in ("design", "work", "footprint", "energy"):
        normalized.add_column(column, justify="right")
    for row in heapkit.normalized_to(results, "KNG"):
        normalized.add_row(escape(row["name"]), f"{row['work']:.3f}", f"{row['footprint']:.3f}", f"{row['energy']:.3f}")
    out.print(normalized)
    if report_path is not None:
        from heapkit import report as hr

        hr.write(hr.Report(title=f"heapkit simulate: {trace}", profile=heapkit.stats(trace).to_dict(),
                           designs=[hr.design_point(r.name, "preset" if r.spec.source.startswith("preset:") else "spec",
                                                    r.to_dict(), show_map=True) for r in results],
                           timeline={f"{r.name} (simulated)": [list(p) for p in r.footprint_samples] for r in results}),
                 report_path)
        console.print(escape(f"report: {report_path}"), highlight=False)
    if show_map:
        for r in results:
            dmm = Table(title=escape(f"DMM map: {r.name}"), title_justify="left")
            for column in ("#", "range (bytes]", "mechanism", "structure", "fit", "order", "requests", "requested",
                           "peak held"):
                dmm.add_column(column, justify="right")
            for u in r.dmm_map:
                high = "∞" if u.range[1] is None else f"{u.range[1]:,}"
                dmm.add_row("os" if u.index < 0 else str(u.index), f"({u.range[0]:,}, {high}]", u.mechanism,
                            u.structure, u.fit, u.order, f"{u.requests:,}", _bytes(u.requested_bytes),
                            _bytes(u.peak_bytes_held))
            out.print(dmm)


@main.command()
@click.argument("traces", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The time model to write (point HEAPKIT_TIME_MODEL or --time-model at it).")
@click.option("--designs", type=click.IntRange(min=0), default=40, show_default=True,
              help="Random valid designs per trace (from its grammar), besides the presets.")
@click.option("-n", "--runs", type=click.IntRange(min=1), default=3, show_default=True,
              help="Interleaved replays per design; the median counts.")
@click.option("--seed", type=int, default=1, show_default=True)
def calibrate(traces: tuple[Path, ...], output: Path, designs: int, runs: int, seed: int) -> None:
    """Fit the time model to this machine: simulate the presets and random designs on each
    TRACE, replay each for real (heapkit-replay --spec, CPU time, the median of interleaved
    runs), and fit predicted_ns's coefficients (docs/simulator.md, "Time model")."""
    specs = [heapkit.preset(p) for p in heapkit.PRESETS]
    for trace in traces:
        specs += heapkit.timemodel.random_designs(trace, designs, seed)
    with Progress("[progress.description]{task.description}", BarColumn(), TimeRemainingColumn(), console=console,
                  transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("replaying", total=None)
        model, rows = heapkit.timemodel.calibrate([str(t) for t in traces], specs, runs=runs,
                                                  progress=lambda done, total: bar.update(task, completed=done,
                                                                                          total=total))
    model.save(output)
    table = Table(title=escape(f"time model: {output}"))
    for column in ("trace", "designs", "Spearman, predicted vs measured", "Spearman, work vs measured"):
        table.add_column(column, justify="right")
    for trace in traces:
        mine = [r for r in rows if r["trace"] == str(trace)]
        table.add_row(escape(trace.name), str(len(mine)),
                      f"{heapkit.timemodel.spearman([model.predict(r) for r in mine], [r['ns'] for r in mine]):.3f}",
                      f"{heapkit.timemodel.spearman([r['work'] for r in mine], [r['ns'] for r in mine]):.3f}")
    out.print(table)
    out.print(", ".join(f"{f} {c:.4g} ns" for f, c in model.coefficients.items() if c > 0) + " (every other feature 0)")


@main.command()
@click.argument("name", required=False, type=click.Choice(heapkit.PRESETS, case_sensitive=False))
def presets(name: str | None) -> None:
    """List the shipped DMM designs, or print one (to copy into a file and edit)."""
    if name is not None:
        click.echo(heapkit.preset(name).to_json())
        return
    table = Table(title="DMM presets (heapkit presets NAME prints one)")
    table.add_column("name")
    table.add_column("design")
    for key in heapkit.PRESETS:
        table.add_row(key, escape(heapkit.preset(key).description))
    out.print(table)


@main.command()
@click.argument("trace", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the grammar here (default: standard output).")
def grammar(trace: Path, output: Path | None) -> None:
    """Write the BNF grammar of DMM designs for TRACE: range bounds and classes at its most
    frequent sizes, every mechanism and policy of the spec format. Edit it and pass it to
    `heapkit search --grammar`."""
    from heapkit.grammar import generate_for_trace

    generated = generate_for_trace(trace)
    threads = ("\nIts threads allocate concurrently: only designs with a heap per thread (one page_segregated\n"
               "allocator over every size, built as libheapkit.so's ScalableHeap).") \
        if generated.heap_per_thread() else ""
    text = generated.to_text(
        header=f"DMM design grammar for {trace}, written by heapkit grammar (docs/search.md).\n"
               "A derivation is a JSON array of allocators with \"upto\" bounds; the last takes the rest." + threads)
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text)
        console.print(escape(f"wrote {output}"), highlight=False)


@main.command()
@click.argument("trace", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-k", "classes", type=int, default=16, show_default=True,
              help="How many size classes (1-64; fewer when the trace has fewer distinct sizes).")
@click.option("--weight", type=click.Choice(["count", "peak", "mixed"]), default="mixed", show_default=True,
              help="Waste counted per request, per object live at the peak of live bytes, or both normalised "
                   "and added.")
def sizeclasses(trace: Path, classes: int, weight: str) -> None:
    """Print the K size classes (multiples of 16 up to 32 KiB) that waste the fewest bytes in
    rounding TRACE's requests, exactly optimal, and their waste against libheapkit.so's 36
    default classes (to 16 KiB: its larger requests are spans, not counted): per request, and at the peak of live bytes (docs/cli.md)."""
    from heapkit import sizeclasses as sc

    histogram = sc.size_histogram(trace)
    fitted = sc.fit(histogram, classes, weight)
    requests = int(histogram.counts.sum())
    at_peak = int(histogram.live_at_peak.sum())
    requested = int((histogram.counts * histogram.sizes).sum())
    live = int((histogram.live_at_peak * histogram.sizes).sum())
    out.print(f"{trace}: {len(histogram.sizes):,} distinct request sizes up to 32 KiB, {requests:,} requests "
              f"({_bytes(requested)}), {at_peak:,} of them live at the peak of live bytes ({_bytes(live)})",
              highlight=False, markup=False, soft_wrap=True)
    out.print(f"{len(fitted.classes)} classes fitted ({weight}): {' '.join(map(str, fitted.classes))}",
              highlight=False, markup=False, soft_wrap=True)
    out.print("bytes lost rounding requests to their class (up to 32 KiB; libheapkit.so's 36 classes stop at 16 KiB, "
              "its larger requests are spans and not counted):",
              highlight=False, markup=False, soft_wrap=True)
    table = Table()
    for column in ("classes", "per request", "of bytes requested", "at the peak", "of live bytes"):
        table.add_column(column, justify="right")
    for name, chosen in ((f"fitted ({len(fitted.classes)})", fitted.classes),
                         (f"default ({len(sc.DEFAULT_CLASSES)})", sc.DEFAULT_CLASSES)):
        per_request = histogram.waste(chosen, "count")
        peak = histogram.waste(chosen, "peak")
        table.add_row(escape(name), f"{per_request / max(requests, 1):.1f} B",
                      f"{100 * per_request / max(requested, 1):.1f}%", _bytes(peak), f"{100 * peak / max(live, 1):.1f}%")
    out.print(table)


def _design_table(title: str, designs, objectives, references: dict[str, dict[str, float]]) -> Table:
    table = Table(title=escape(title))
    for column in ("design", *objectives, "allocators", *[f"footprint / {r}" for r in references]):
        table.add_column(column, justify="right")
    for d in designs:
        mechanisms = " + ".join(a["mechanism"] for a in d.spec.allocators)
        ratios = [f"{d.objective('footprint') / ref['footprint']:.3f}" if ref.get("footprint") else "-"
                  for ref in references.values()]
        table.add_row(escape(d.spec.name), *[f"{d.objective(o):,.0f}" for o in objectives], escape(mechanisms), *ratios)
    return table


@main.command()
@click.argument("trace", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("search"),
              show_default=True, help="Directory for the front, its specs, the checkpoint.")
@click.option("--grammar", "grammar_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="A grammar file (default: generated from the trace, as `heapkit grammar` writes it).")
@click.option("--objectives", default="time,footprint,energy", show_default=True,
              help="Any of time (the time model's predicted replay time), work, footprint, energy, comma-separated: "
                   "a Pareto front by NSGA-II.")
@click.option("--weights", default=None, help="Comma-separated weights, one per objective: the paper's single "
                                              "objective (a weighted sum of the objectives over Kingsley's).")
@click.option("--population", type=click.IntRange(min=4), default=60, show_default=True)
@click.option("--generations", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--operators", type=click.Choice(["subtree", "codon"]), default="subtree", show_default=True,
              help="subtree: crossover and mutation on the derivation tree (one subtree swapped or redrawn, the rest "
                   "kept); codon: GE's one-point crossover and per-codon mutation (--mutation).")
@click.option("--mutation", type=click.FloatRange(0, 1), default=0.02, show_default=True,
              help="Per-codon probability (--operators codon).")
@click.option("--immigrants", type=click.FloatRange(0, 1), default=0.25, show_default=True,
              help="Share of the first generation's offspring replaced by random genomes (later generations: "
                   "adapted, unless --fixed-shares).")
@click.option("--refine", type=click.FloatRange(0, 1), default=0.25, show_default=True,
              help="Share of the first generation's offspring made one setting or one part away from a design of "
                   "the front, those adding most to its hypervolume first (Pareto local search; later generations: "
                   "adapted, unless --fixed-shares).")
@click.option("--fixed-shares", is_flag=True,
              help="Keep --immigrants and --refine for every generation, instead of moving each generation's "
                   "offspring to the way (breeding, immigrants, local search) whose offspring added to the front.")
@click.option("--screen", type=click.IntRange(min=1), default=1, show_default=True,
              help="Candidates made for each offspring; a model learnt from the designs simulated so far picks the "
                   "one to simulate (1: no screening; docs/search.md says when it helps).")
@click.option("--crossover", type=click.FloatRange(0, 1), default=0.8, show_default=True)
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--resume", is_flag=True, help="Continue the search whose checkpoint is in the output directory.")
@click.option("--cache", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The evaluation cache (default: ~/.cache/heapkit/evaluations.sqlite), shared by later runs.")
@click.option("-j", "--threads", type=click.IntRange(min=1), default=None, help="Simulations at once (default: cores).")
@click.option("--cluster", default=None, help="ray://ADDRESS or auto: evaluate on a Ray cluster (pip install heapkit[ray]).")
@click.option("--sample", type=click.IntRange(min=1000), default=None,
              help="Search on the trace's first N operations, then confirm the front on the whole trace.")
@click.option("--energy", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="A JSON file overriding the energy model's parameters.")
@click.option("--no-glibc", is_flag=True, help="Do not replay the trace on glibc for the footprint reference.")
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write an HTML report (profile, the front, convergence, DMM maps).")
def search(trace: Path, out_dir: Path, grammar_path: Path | None, objectives: str, weights: str | None, population: int,
           generations: int, operators: str, mutation: float, immigrants: float, refine: float, fixed_shares: bool,
           screen: int, crossover: float, seed: int,
           resume: bool, cache: Path | None, threads: int | None, cluster: str | None, sample: int | None,
           energy: Path | None, no_glibc: bool,
           report_path: Path | None) -> None:
    """Search the DMM design space for TRACE by grammatical evolution: the Pareto front (or,
    with --weights, the best designs) written to OUTPUT/front.json and OUTPUT/specs/, with a
    table normalised to Kingsley, Lea and glibc's replayed footprint. Ctrl-C stops early and
    keeps the best so far; --resume continues."""
    from rich.progress import MofNCompleteColumn, TextColumn

    from heapkit.designs import find_designs
    from heapkit.grammar import Grammar

    chosen = tuple(o.strip() for o in objectives.split(",") if o.strip())
    weight_values = [float(w) for w in weights.split(",")] if weights else None
    grammar_obj = Grammar.load(grammar_path) if grammar_path else None
    model = load_energy_model(energy)
    runner = None
    if cluster is not None:
        from heapkit.cluster import ray_runner

        runner = ray_runner(cluster, trace, model)
    columns = ("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[status]}"))
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("generations", total=generations, status="")

        def progress(h: dict) -> None:
            best = ", ".join(f"{o} {v:,.0f}" for o, v in h["best"].items())
            bar.update(task, completed=h["generation"], status=escape(
                f"front {h['front']}, best {best}, {h['evaluations']} evaluations, {h['cache_hits']} cache hits"))

        front, result = find_designs(trace, out_dir, objectives=chosen, sample=sample, glibc_reference=not no_glibc,
                                     progress=progress, grammar=grammar_obj, weights=weight_values,
                                     population=population, generations=generations, mutation=mutation,
                                     immigrants=immigrants, refine=refine, adaptive=not fixed_shares,
                                     operators=operators, screen=screen,
                                     crossover=crossover, seed=seed, resume=resume, cache=cache, threads=threads,
                                     energy=model, runner=runner)
    if result.interrupted:
        console.print("interrupted: the front below is the best so far", style="yellow")
    if result.heap_per_thread:
        out.print("its threads allocate at once: designs with a heap per thread only (page_segregated, built as "
                  "libheapkit.so's ScalableHeap); the other presets would run behind one lock", highlight=False)
    out.print(_design_table(f"{trace}: front of {len(result.front)} designs ({result.evaluations} simulations, "
                            f"{result.cache_hits} cache hits, {result.seconds:.0f} s)", result.front, chosen,
                            front.references))
    out.print(escape(f"front: {out_dir / 'front.json'}; specs in {out_dir / 'specs'}"), highlight=False, soft_wrap=True)
    if report_path is not None:
        from heapkit import report as hr

        designs = [hr.design_point(d.name, "front", d.metrics, show_map=i < 3) for i, d in enumerate(front.designs)]
        designs += [hr.design_point(n, "preset", d.metrics) for n, d in result.presets.items()]
        hr.write(hr.Report(title=f"heapkit search: {trace}", profile=heapkit.stats(trace).to_dict(), designs=designs,
                           history=front.history), report_path)
        out.print(escape(f"report: {report_path}"), highlight=False, soft_wrap=True)


@main.command()
@click.argument("spec", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True, help="The header to write.")
@click.option("--namespace", default=None, help="C++ namespace of the design's types (default: the header's stem).")
def emit(spec: Path, output: Path, namespace: str | None) -> None:
    """Write SPEC as a C++ header: the heap-layers type expression with compile-time constants."""
    from heapkit.build import emit as emit_header

    emit_header(heapkit.load_spec(spec), output, namespace)
    console.print(escape(f"wrote {output}"), highlight=False)


@main.command()
@click.argument("spec", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The preload library to build (lib<name>.so); the static library, CMake snippet and header go beside it.")
@click.option("--trace", "trace", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Verify the build on this trace: measured against predicted.")
@click.option("-n", "--runs", type=click.IntRange(min=1), default=3, show_default=True)
def build(spec: Path, output: Path, trace: Path | None, runs: int) -> None:
    """Build SPEC as a real allocator (a preload library, a static library and a CMake snippet)
    and, with --trace, verify it: the built heap's footprint against the simulator's, to the
    byte; its speed against the run-time-configured design and glibc."""
    from heapkit import build as hb

    result = hb.build(heapkit.load_spec(spec), output)
    out.print(escape(f"built {result.shared_library}, {result.static_library}, {result.cmake_snippet}, "
                     f"{result.header}"), highlight=False, soft_wrap=True)
    if trace is None:
        return
    v = hb.verify(result, trace, runs)
    table = Table(title=escape(f"{result.spec.name} on {trace}: measured against predicted (medians of {runs})"))
    for column in ("", "value"):
        table.add_column(column, justify="right")
    table.add_row("predicted footprint (simulator)", f"{v.predicted_footprint:,} B")
    table.add_row("measured footprint (built heap)", f"{v.measured_footprint:,} B")
    table.add_row("equal to the byte", "yes" if v.footprint_matches else "[red]NO[/red]")
    table.add_row("replay, compiled design", f"{v.compiled_seconds * 1e3:.2f} ms")
    table.add_row("replay, run-time-configured design", f"{v.configured_seconds * 1e3:.2f} ms")
    table.add_row("compiled speed-up", f"{v.speedup_over_configured:.2f}x")
    for name, figures in v.preload.items():
        table.add_row(escape(f"LD_PRELOAD {name}"), f"{figures['seconds'] * 1e3:.2f} ms, peak RSS "
                                                     f"{_bytes(figures['peak_rss_bytes'])}")
    out.print(table)
    out.print(escape(f"LD_PRELOAD={result.shared_library} your-program"), highlight=False, soft_wrap=True)
    if not v.footprint_matches:
        sys.exit(1)


def _seconds(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.3f} s"


def _race_table(title: str, race, recommended: str | None) -> Table:
    """A race's standings, narrow enough for 80 columns: medians with their spread, paired
    ratios to the reference, verdicts."""
    from rich import box

    front = {s.name for s in race.front()}
    reference = race.reference or ("glibc" if "glibc" in race.names else None)
    table = Table(title=escape(title), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("allocator", "CPU time (min–max)", "peak RSS", "× time", "× RSS", "verdict"):
        table.add_column(column, justify="left" if column in ("allocator", "verdict") else "right",
                         no_wrap=column not in ("allocator", "verdict"))
    for s in sorted(race.standings, key=lambda s: (s.name != recommended, s.name not in front, s.cpu_seconds)):
        if not s.runs():
            continue
        low, high = s.spread("cpu_seconds")
        unit, scale = ("ms", 1e3) if high < 10 else ("s", 1)
        ratios = [f"{race.compare(s.name, reference, a).ratio:.3f}" if s.name != reference else "1"
                  for a in ("cpu_seconds", "peak_rss")] if reference else ["-", "-"]
        if s.disqualified:
            verdict = f"[red]{escape(s.disqualified)}[/red]"
        elif s.name in front:
            verdict = "[bold green]front[/bold green]" + (" ★ recommended" if s.name == recommended else "")
        else:
            verdict = escape((s.eliminated or "dominated by " + ", ".join(race.dominated_by(s.name)))
                             + (", stopped" if s.stopped_after is not None else ""))
        name = f"[bold]{escape(s.name)}[/bold]" if s.kind == "design" else escape(s.name)
        table.add_row(name, f"{s.cpu_seconds * scale:.0f} ({low * scale:.0f}–{high * scale:.0f}) {unit}",
                      _bytes(s.peak_rss), *ratios, verdict)
    table.caption = escape("bold: designs built for this program" + (
        f"; × time, × RSS: medians of the paired ratios to {reference}'s runs" if reference else ""))
    return table


@main.command(context_settings={"ignore_unknown_options": True})
@click.option("-o", "--output", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("tune"),
              show_default=True, help="Where the traces, specs, libraries, races and report.html go.")
@click.option("--prefer", type=click.Choice(["balanced", "time", "memory"]), default="balanced", show_default=True,
              help="Which point of the measured front to recommend: the least CPU time, the least peak RSS, or the "
                   "least product of the two (each over the best).")
@click.option("--process", default=None, metavar="PROGRAM|PID",
              help="Tune on this program's busiest process (its path or file name), or on this process [default: the "
                   "program that made the most malloc-family calls].")
@click.option("--merge", is_flag=True, help="Tune on every process of that program, one after the other.")
@click.option("--population", type=click.IntRange(min=4), default=24, show_default=True)
@click.option("--generations", type=click.IntRange(min=1), default=12, show_default=True)
@click.option("--objectives", default="time,footprint,energy", show_default=True,
              help="Any of time (predicted replay time), work, footprint, energy.")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--sample", type=click.IntRange(min=0), default=None,
              help="Search on the trace's first N operations, then confirm the front on the whole trace; 0: search "
                   "on the whole trace [default: the first 1,000,000 of a trace of 2,000,000 or more].")
@click.option("--designs", type=click.IntRange(min=0, max=12), default=5, show_default=True,
              help="Designs of the simulated front to build (LEA is built too).")
@click.option("--finalists", type=click.IntRange(min=0, max=8), default=3, show_default=True,
              help="Designs raced on the program itself, from the front of the race on the trace.")
@click.option("-n", "--runs", type=click.IntRange(min=1), default=8, show_default=True,
              help="Rounds of each race before its first look at the evidence (later if an interval at the "
                   "race's confidence needs more).")
@click.option("--max-runs", type=click.IntRange(min=1), default=20, show_default=True,
              help="Rounds of each race at most.")
@click.option("--budget", type=click.FloatRange(min=0), default=240, show_default=True,
              help="Seconds for the race on the program (the rounds of its first look always run).")
@click.option("--trace-budget", type=click.FloatRange(min=0), default=90, show_default=True,
              help="Seconds for the race on the trace.")
@click.option("--peers", default=",".join(DEFAULT_PEERS), show_default=True,
              help="The allocators off the shelf to race (those installed; glibc always).")
@click.option("--cache", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("-j", "--threads", type=click.IntRange(min=1), default=None)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def tune(out_dir: Path, prefer: str, process: str | None, merge: bool, population: int, generations: int,
         objectives: str, seed: int, sample: int | None, designs: int, finalists: int, runs: int, max_runs: int,
         budget: float, trace_budget: float, peers: str, cache: Path | None, threads: int | None,
         command: tuple[str, ...]) -> None:
    """Find the allocator that suits a program, measured: record it (every process), search
    the design space on its trace, build the best designs, race them against glibc,
    jemalloc, mimalloc, tcmalloc and heapkit's libraries on the trace and then on the
    program itself, and recommend a point of the measured front (time x peak RSS). Writes
    OUTPUT/report.html. Rerun to continue an interrupted tuning.
    Usage: heapkit tune [-o DIR] -- CMD ARGS"""
    from heapkit import tune as ht

    peer_names = tuple(p.strip() for p in peers.split(",") if p.strip())
    if "glibc" not in peer_names:
        peer_names = ("glibc",) + peer_names  # the reference every run is checked against
    settings = ht.TuneSettings(population=population, generations=generations,
                               objectives=tuple(o.strip() for o in objectives.split(",") if o.strip()), seed=seed,
                               designs=designs, finalists=finalists, process=process, merge=merge, sample=sample,
                               min_rounds=runs, max_rounds=max(runs, max_runs), trace_budget=trace_budget,
                               program_budget=budget, peers=peer_names, prefer=prefer)
    with console.status("tuning", spinner="dots") as status:
        result = ht.tune(command, out_dir, settings, cache=cache, threads=threads,
                         progress=lambda stage, message: status.update(escape(f"{stage}: {message}")))
    if result.empty:
        out.print(ht.EMPTY_PROGRAM, highlight=False, markup=False, soft_wrap=True)
        return
    out.print(escape(result.selection.describe()), highlight=False, soft_wrap=True)
    race = result.program_race
    out.print(_race_table(f"{' '.join(command)}: the program under each allocator ({race.rounds} rounds)", race,
                          result.recommendation.name))
    out.print(escape(f"rule: {race.settings.rule()}"), highlight=False, soft_wrap=True, style="dim")
    if result.missing_peers:
        out.print(escape("not installed, so not measured: " + ", ".join(ht.PEER_NAMES.get(p, p)
                                                                          for p in result.missing_peers)),
                  highlight=False, soft_wrap=True)
    undecided = race.open_pairs([s.name for s in race.front()])
    if undecided:
        pairs = "; ".join(f"{c.a} and {c.b} on {'time' if c.axis == 'cpu_seconds' else 'RSS'} "
                          f"({c.ratio:.3f}, {c.low:.3f}–{c.high:.3f})" for c in undecided[:4])
        out.print(escape(f"not separated within the budget: {pairs}"), highlight=False, soft_wrap=True)
    for d in result.designs:
        if not d.footprint_matches:
            out.print(escape(f"{d.name}: the built heap held {d.heap_peak_bytes_held:,} B, the simulator predicted "
                             f"{d.predicted_footprint:,} B"), style="red", highlight=False, soft_wrap=True)
    out.print(escape(result.recommendation.line), highlight=False, soft_wrap=True, style="bold")
    out.print(escape(f"report: {result.report.resolve()}"), highlight=False, soft_wrap=True)
    library = result.library_of(result.recommendation.name)
    if library is None:
        out.print("use it: nothing to preload (glibc is the C library's own allocator)", highlight=False)
    else:
        out.print(escape(f"use it: LD_PRELOAD={shlex.quote(str(library.resolve()))} {shlex.join(command)}"),
                  highlight=False, soft_wrap=True)
    stages = ", ".join(f"{k} {v:.1f} s" for k, v in result.stage_seconds.items())
    console.print(escape(f"stages: {stages}"), highlight=False, soft_wrap=True)


@main.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--prefer", type=click.Choice(["balanced", "time", "memory"]), default="balanced", show_default=True)
def report(directory: Path, prefer: str) -> None:
    """Regenerate DIRECTORY/report.html from what `heapkit tune` left there."""
    from heapkit.tune import write_tune_report

    out.print(escape(f"wrote {write_tune_report(directory, prefer)}"), highlight=False, soft_wrap=True)


@main.command()
@click.argument("trace", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("designs", nargs=-1, required=True)
@click.option("-n", "--runs", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the comparison as an HTML report.")
def compare(trace: Path, designs: tuple[str, ...], runs: int, report_path: Path | None) -> None:
    """Compare DESIGNS on TRACE, simulated and measured side by side: each a spec file, a preset
    (KNG, FIB, S10, EXA, LEA, BOX, ALEA, HKS) or a real allocator (glibc, jemalloc, mimalloc, heapkit, lea,
    kingsley, a .so path)."""
    from heapkit.compare import compare as run_compare
    from heapkit.compare import report as compare_report

    rows = run_compare(trace, designs, runs=runs)
    table = Table(title=escape(f"{trace}: simulated and measured (medians of {runs})"))
    for column in ("design", "work", "predicted footprint", "energy", "replay time", "bytes held", "resident growth"):
        table.add_column(column, justify="right")
    for r in rows:
        sim = r.simulated
        table.add_row(escape(r.name), f"{sim.work:,}" if sim else "-", f"{sim.peak_footprint:,}" if sim else "-",
                      f"{sim.energy_nj / 1e6:.3f} mJ" if sim else "-", f"{r.seconds * 1e3:.2f} ms",
                      f"{r.heap_peak_bytes_held:,}" if r.heap_peak_bytes_held is not None else "-", _bytes(r.footprint))
    out.print(table)
    if report_path is not None:
        from heapkit import report as hr

        hr.write(compare_report(trace, rows), report_path)
        out.print(escape(f"report: {report_path}"), highlight=False, soft_wrap=True)


@main.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
def validate(specs: tuple[str, ...]) -> None:
    """Check DMM spec files: one line each, the first error naming its field (exit status 1)."""
    failed = False
    for path in specs:
        try:
            spec = heapkit.load_spec(path)
            out.print(escape(f"{path}: valid ({spec.name}, {len(spec.allocators)} allocators, design {spec.key})"),
                      highlight=False, soft_wrap=True)
        except heapkit.SpecError as error:
            console.print(Text(str(error), style="red"), highlight=False, soft_wrap=True)
            failed = True
    if failed:
        sys.exit(1)


@main.command()
@click.argument("trace", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def check(trace: Path) -> None:
    """Check that TRACE is a complete, valid heapkit trace (exit status 1 if not)."""
    header = heapkit.read_header(trace)
    n = sum(len(chunk["op"]) for chunk in heapkit.events(trace))
    out.print(f"{trace}: valid heapkit trace, version {header.version}, {n:,} operations", highlight=False, markup=False)


if __name__ == "__main__":
    main()
