"""The BNF grammar of DMM designs, generated from a trace's size profile, and grammatical
evolution's genotype-to-design mapping.

A grammar file has one rule per line, ``<name> ::= alternative | alternative ...``; an
alternative is a sequence of nonterminals (``<name>``) and literal text. Literals are
fragments of JSON, so a complete derivation from ``<dmm>`` is a JSON array of allocator
objects, each with an ``"upto"`` bound (``null`` for the last one) instead of a range; a
last allocator whose mechanism is ``"os"`` means "the sizes above go to the OS". Lines
starting with ``#`` are comments. ``heapkit grammar TRACE`` writes one; edit it and pass
it to ``heapkit search --grammar FILE``.

Every derivation of a generated grammar is a valid spec (``tests/python/test_search.py``
checks this over thousands of random genomes); a hand-edited grammar may derive invalid
ones, which the search scores as infeasible.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from heapkit.dmm import Spec, parse_spec
from heapkit.sizeclasses import DEFAULT_CLASSES

_TOKEN = re.compile(r"<[A-Za-z0-9_-]+>|[^<]+")
_RULE = re.compile(r"^\s*(<[A-Za-z0-9_-]+>)\s*::=\s*(.*)$")

MAX_WRAPS = 2  # a genome is read at most this many extra times before the mapping gives up


class GrammarError(ValueError):
    pass


@dataclass(frozen=True)
class Grammar:
    start: str
    rules: dict[str, list[list[str]]]  # nonterminal -> alternatives -> items

    @classmethod
    def parse(cls, text: str, source: str = "grammar") -> "Grammar":
        rules: dict[str, list[list[str]]] = {}
        start = None
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            match = _RULE.match(line)
            if match is None:
                raise GrammarError(f"{source}:{number}: expected '<name> ::= alternative | ...'")
            name, body = match.groups()
            if name in rules:
                raise GrammarError(f"{source}:{number}: {name} is defined twice")
            alternatives = []
            for alternative in body.split("|"):
                items = [t if t.startswith("<") else t.strip() for t in _TOKEN.findall(alternative.strip())]
                alternatives.append([t for t in items if t != ""])
            rules[name] = alternatives
            start = start or name
        if start is None:
            raise GrammarError(f"{source}: no rules")
        for name, alternatives in rules.items():
            for alternative in alternatives:
                for item in alternative:
                    if item.startswith("<") and item not in rules:
                        raise GrammarError(f"{source}: {name} uses {item}, which no rule defines")
        return cls(start, rules)

    @classmethod
    def load(cls, path: str | Path) -> "Grammar":
        return cls.parse(Path(path).read_text(encoding="utf-8"), str(path))

    def heap_per_thread(self) -> bool:
        """Whether every design it derives is one page_segregated allocator over every size,
        built with a heap per thread: :func:`generate`'s grammar for threads that allocate
        concurrently."""
        return self.rules.get(self.start) == [["<page-segregated>"]]

    def to_text(self, header: str = "") -> str:
        lines = [f"# {line}" for line in header.splitlines()]
        for name, alternatives in self.rules.items():
            lines.append(f"{name} ::= " + " | ".join(" ".join(items) for items in alternatives))
        return "\n".join(lines) + "\n"

    # ---- grammatical evolution's mapping ----

    def derive(self, genome: Sequence[int], max_wraps: int = MAX_WRAPS) -> str | None:
        """The text a genome derives (leftmost expansion; each choice among k > 1
        alternatives takes the next codon modulo k; the genome wraps around at most
        ``max_wraps`` times), or None when it does not finish."""
        return self.derive_counting(genome, max_wraps)[0]

    def derive_counting(self, genome: Sequence[int], max_wraps: int = MAX_WRAPS) -> tuple[str | None, int]:
        """:meth:`derive`'s text and how many codons the derivation read (counting each
        reading of a wrapped genome): a change to the codons beyond those changes nothing."""
        if not genome:
            return None, 0
        out: list[str] = []
        stack = [self.start]
        used = 0
        limit = len(genome) * (max_wraps + 1)
        while stack:
            item = stack.pop()
            if not item.startswith("<"):
                out.append(item)
                continue
            alternatives = self.rules[item]
            if len(alternatives) == 1:
                choice = 0
            else:
                if used >= limit:
                    return None, used
                choice = genome[used % len(genome)] % len(alternatives)
                used += 1
            stack.extend(reversed(alternatives[choice]))
        return "".join(out), used

    def choices(self, genome: Sequence[int], max_wraps: int = MAX_WRAPS) -> list[tuple[int, int]]:
        """The choices the derivation of ``genome`` makes, in order: for each, the index of
        the codon it reads and how many alternatives it chose among (k > 1). Changing a
        codon to another value modulo k picks another alternative there; codons no choice
        reads change nothing."""
        read: list[tuple[int, int]] = []
        if not genome:
            return read
        stack = [self.start]
        limit = len(genome) * (max_wraps + 1)
        while stack:
            item = stack.pop()
            if not item.startswith("<"):
                continue
            alternatives = self.rules[item]
            choice = 0
            if len(alternatives) > 1:
                if len(read) >= limit:
                    break
                index = len(read) % len(genome)
                read.append((index, len(alternatives)))
                choice = genome[index] % len(alternatives)
            stack.extend(reversed(alternatives[choice]))
        return read

    def derivation_tree(self, genome: Sequence[int]):
        """The derivation tree of ``genome``: (nonterminal, start, end, children) for the
        start symbol, each child a node of the same shape, in the order expanded; the
        codons genome[start:end] are exactly those the node's subtree reads (a leftmost
        derivation reads each subtree's codons in one block), so another block deriving the
        same nonterminal can replace them, and the rest of the genome derives what it
        derived before. None when the derivation wraps around the genome (its blocks are
        not contiguous then)."""
        position = 0

        def expand(symbol: str):
            nonlocal position
            start, alternatives = position, self.rules[symbol]
            choice = 0
            if len(alternatives) > 1:
                if position >= len(genome):
                    return None
                choice = genome[position] % len(alternatives)
                position += 1
            children = []
            for item in alternatives[choice]:
                if item.startswith("<"):
                    child = expand(item)
                    if child is None:
                        return None
                    children.append(child)
            return (symbol, start, position, children)

        return expand(self.start)

    def subtrees(self, genome: Sequence[int]) -> list[tuple[str, int, int]] | None:
        """:meth:`derivation_tree`'s nodes as (nonterminal, start, end), in the order
        expanded; None when the derivation wraps around the genome."""
        tree = self.derivation_tree(genome)
        if tree is None:
            return None
        nodes: list[tuple[str, int, int]] = []
        todo = [tree]
        while todo:
            symbol, start, end, children = todo.pop()
            nodes.append((symbol, start, end))
            todo.extend(reversed(children))
        return nodes

    def random_subtree(self, symbol: str, rng, avoid: int | None = None, max_codons: int = 256) -> list[int]:
        """Codons that derive ``symbol`` by random choices (its first choice other than
        alternative ``avoid``), as a block to put in place of one of its subtrees."""
        codons: list[int] = []
        stack = [symbol]
        first = True
        while stack and len(codons) < max_codons:
            alternatives = self.rules[stack.pop()]
            choice = 0
            if len(alternatives) > 1:
                choice = rng.randrange(len(alternatives))
                if first and avoid is not None:
                    choice = (avoid + 1 + rng.randrange(len(alternatives) - 1)) % len(alternatives)
                codons.append(choice + len(alternatives) * rng.randrange(256 // len(alternatives)))
            first = False
            stack.extend(item for item in reversed(alternatives[choice]) if item.startswith("<"))
        return codons

    def genome_for(self, target: str, max_codons: int = 64) -> list[int] | None:
        """A genome that derives exactly ``target`` (white space ignored), found by a
        depth-first search over the choices; None if none does within max_codons."""
        goal = re.sub(r"\s+", "", target)

        def search(stack: list[str], done: str, codons: list[int]) -> list[int] | None:
            while stack and not stack[-1].startswith("<"):
                done += re.sub(r"\s+", "", stack.pop())
                if not goal.startswith(done):
                    return None
            if not stack:
                return codons if done == goal else None
            if len(codons) > max_codons:
                return None
            alternatives = self.rules[stack[-1]]
            for index, alternative in enumerate(alternatives):
                rest = stack[:-1] + list(reversed(alternative))
                found = search(rest, done, codons + ([index] if len(alternatives) > 1 else []))
                if found is not None:
                    return found
            return None

        found = search([self.start], "", [])
        return found if found else ([0] if found == [] else None)


def design_from_text(text: str, name: str = "design") -> Spec:
    """The spec a derivation describes: parts sorted by their bounds, chained into ranges."""
    try:
        parts = json.loads("[" + text + "]")
    except json.JSONDecodeError as error:
        raise GrammarError(f"the derivation is not JSON: {error}") from None
    short_lived = [p for p in parts if "short_lived" in p]
    parts = [p for p in parts if "short_lived" not in p]
    general = parts[-1]
    bounded = sorted((p for p in parts[:-1]), key=lambda p: p["upto"])
    allocators, low = [], 0
    for part in bounded:
        if part["upto"] <= low:
            continue  # a bound another part already covers: the design has one part fewer
        allocator = {k: v for k, v in part.items() if k != "upto"}
        allocators.append({"range": [low, part["upto"]], **allocator})
        low = part["upto"]
    fallback = "os"
    if general.get("mechanism") != "os":
        allocators.append({"range": [low, None], **{k: v for k, v in general.items() if k != "upto"}})
    if not allocators:
        allocators.append({"range": [0, None], "mechanism": "kingsley"})
    document = {"format": "heapkit-dmm/1", "name": name, "allocators": allocators, "fallback": fallback}
    if short_lived:
        area = dict(short_lived[0])
        document["short_lived"] = {"sizes": area.pop("short_lived"), "allocator": area}
    return parse_spec(json.dumps(document))


# ---- generating a grammar from a profile --------------------------------------------------

def _blocks(size: int) -> tuple[int, int]:
    """The block lengths a request gets with an 8-byte and with a 16-byte header."""
    return tuple(max(32, (size + header + 15) // 16 * 16) for header in (8, 16))


def hot_sizes(top_sizes: Iterable[tuple[int, int]], limit: int = 8) -> list[int]:
    """The most frequent request sizes, ascending, no two sharing a block length under any
    header layout (so they are valid class sizes whatever header a design picks)."""
    chosen: list[int] = []
    for size, _count in top_sizes:
        if size <= 0 or size > 1 << 32:
            continue
        mine = _blocks(size)
        if all(mine[0] != _blocks(c)[0] and mine[1] != _blocks(c)[1] for c in chosen):
            chosen.append(size)
        if len(chosen) == limit:
            break
    return sorted(chosen)


# libheapkit.so's single-thread path (the page_segregated mechanism's defaults), as the
# grammar spells it: its class list and each policy at the value libheapkit.so ships, so
# the HKS preset is a point of the searched space and its neighbours a mutation away.
PAGE_SEGREGATED_DEFAULTS = {
    "warm_superblocks": "64",
    "purge_delay": "16384",
    "resident_free": '{"min_bytes": 4194304, "max_bytes": 134217728, "in_use_percent": 150}',
    "large_cache": '{"max_blocks": 8, "fit_slack": 4, "idle_operations": 1024}',
    "span_max_bytes": "33554432",
}
# The values the search tries for page_segregated's policies, libheapkit.so's among them:
# fewer warm superblocks, shorter purge delays, smaller resident budgets and caches hold
# less memory for some more work.
PAGE_SEGREGATED_CHOICES = {
    "warm_superblocks": ("0", "4", "16", "64"),
    "purge_delay": ("64", "512", "16384", "32768"),
    # 1 MiB: sqlite3's free spans left by a realloc chain (64 KiB to 2 MiB) held 172 KiB
    # at its peak under the 4 MiB budget, none under this one, for 7% more predicted time.
    "resident_free": ('{"min_bytes": 0, "max_bytes": 1048576, "in_use_percent": 25}',
                      '{"min_bytes": 0, "max_bytes": 4194304, "in_use_percent": 25}',
                      '{"min_bytes": 1048576, "max_bytes": 16777216, "in_use_percent": 50}',
                      PAGE_SEGREGATED_DEFAULTS["resident_free"],
                      # below_peak: free pages kept only under the most ever in use, so they
                      # never raise peak RSS (what a user measures), and purged as the
                      # program climbs past it; below its peak it reuses them all. A
                      # quarter of what is in use up to 4 MiB, and libheapkit.so's budget.
                      '{"min_bytes": 0, "max_bytes": 4194304, "in_use_percent": 25, "below_peak": true}',
                      '{"min_bytes": 4194304, "max_bytes": 134217728, "in_use_percent": 150, "below_peak": true}'),
    "large_cache": ('{"max_blocks": 0, "fit_slack": 1, "idle_operations": 1}',
                    '{"max_blocks": 2, "fit_slack": 2, "idle_operations": 64}',
                    PAGE_SEGREGATED_DEFAULTS["large_cache"],
                    '{"max_blocks": 32, "fit_slack": 4, "idle_operations": 16384}'),
    # Blocks above span_max_bytes are mappings of their own (cached as large_cache says):
    # with no cache, glibc's way past its mmap threshold. A block the program writes only
    # in part then costs only the pages it writes, where a span reused from the segments
    # brings its free pages already resident (sqlite3's tuned design: 400 KiB less peak
    # RSS with 64 KiB and no cache, docs/tune.md).
    "span_max_bytes": ("65536", "262144", PAGE_SEGREGATED_DEFAULTS["span_max_bytes"]),
}


def _page_segregated_fields(classes: Sequence[int] | str, **values: str) -> str:
    """A page_segregated allocator's fields (no braces, no bound), as the grammar spells them."""
    values = {**PAGE_SEGREGATED_DEFAULTS, **values}
    classes = classes if isinstance(classes, str) else json.dumps(list(classes))
    return ('"mechanism": "page_segregated", "class_sizes": ' + classes + ", " +
            ", ".join(f'"{k}": {values[k]}' for k in PAGE_SEGREGATED_DEFAULTS))


def _page_segregated(classes: Sequence[int], **values: str) -> str:
    return '{"upto": null, ' + _page_segregated_fields(classes, **values) + "}"


PRESET_ALTERNATIVES = {
    # the paper's general-purpose managers, so the search starts from them (seeded genomes)
    "KNG": '{"upto": null, "mechanism": "kingsley"}',
    "LEA": '{"upto": null, "mechanism": "lea"}',
    # heapkit's own general-purpose designs: libheapkit-lea.so's heap, libheapkit.so's
    "ALEA": '{"upto": null, "mechanism": "adaptive_lea"}',
    "HKS": _page_segregated(DEFAULT_CLASSES),
    "FIB": '{"upto": null, "mechanism": "fibonacci_buddy", "min_block_bytes": 32, "area_bytes": 1048576, '
           '"coalesce": "immediate", "trim": true}',
    "S10": '{"upto": null, "mechanism": "segregated_lists", "classes": 10, "header": "boundary_tags", '
           '"list": {"structure": "doubly_linked", "fit": "first", "order": "lifo"}, "split": true, '
           '"coalesce": "immediate", "trim": true, "chunk": {"bytes": 65536, "max_bytes": 65536, "growth": 1.0}}',
}


def generate(top_sizes: Sequence[tuple[int, int]], max_size: int,
             class_lists: Sequence[Sequence[int]] = (),
             short_lived: Sequence[Sequence[tuple[int, int]]] = (), concurrent_threads: bool = False) -> Grammar:
    """The design space for a program whose most frequent sizes are ``top_sizes`` and whose
    largest request is ``max_size``: range bounds at its hot sizes and at powers of two up
    to its largest request, exact and strict classes at its hot sizes, and every mechanism,
    list policy and chunk policy of the spec format; libheapkit.so's page-segregated heap
    with libheapkit.so's classes or any of ``class_lists`` (size classes fitted to the
    trace, :mod:`heapkit.sizeclasses`) and its policies' values, as a whole design or for a
    range of small sizes in front of another allocator; and, given ``short_lived`` (sets of
    size ranges whose objects die young, :mod:`heapkit.lifetimes`), designs that place
    those sizes in an area of their own (the spec's ``short_lived``).

    With ``concurrent_threads`` (the trace's threads allocate concurrently), only the
    designs composed with the thread layers: one page_segregated allocator over every
    size, which ``heapkit build`` ships as libheapkit.so's ScalableHeap (a heap per thread,
    frees returned to the owner) and the simulator runs with a heap per trace thread. The
    other designs would run behind one lock, which the simulator does not price."""
    hot = hot_sizes(top_sizes)
    bounds = sorted({s for s in hot} | {1 << k for k in range(6, 21) if (1 << k) <= max(max_size, 64)})
    small_bounds = [b for b in bounds if b <= 1 << 20] or [64]
    classes = json.dumps(hot or [16, 32, 64])
    rules: dict[str, list[list[str]]] = {}

    def rule(name: str, *alternatives: str) -> None:
        rules[name] = [[t if t.startswith("<") else t.strip() for t in _TOKEN.findall(a.strip())] for a in alternatives]

    dmm = ["<general>", "<part> , <general>", "<part> , <part> , <general>",
           "<part> , <part> , <part> , <general>", "<page-segregated>"]
    if short_lived:
        dmm += ["<short-lived> , <general>", "<short-lived> , <part> , <general>"]
    rule("<dmm>", *dmm)
    lists = [list(DEFAULT_CLASSES)]
    for fitted in class_lists:
        if list(fitted) not in lists:
            lists.append(list(fitted))
    ps_fields = _page_segregated_fields("<ps-classes>", **{k: f"<ps-{k.replace('_', '-')}>"
                                                            for k in PAGE_SEGREGATED_DEFAULTS})
    rule("<page-segregated>", "{\"upto\": null, <ps-fields> }")
    rule("<ps-fields>", ps_fields)
    if short_lived:
        rule("<short-lived>", '{"short_lived": <sl-sizes> , <sl-allocator> }')
        rule("<sl-sizes>", *[json.dumps([list(r) for r in ranges]) for ranges in short_lived])
        rule("<sl-allocator>", "<ps-fields>", "<fits>", '"mechanism": "kingsley"', '"mechanism": "lea"')
    rule("<ps-classes>", *[json.dumps(c) for c in lists])
    for key, values in PAGE_SEGREGATED_CHOICES.items():
        rule(f"<ps-{key.replace('_', '-')}>", *values)
    rule("<part>", '{"upto": <bound> , <part-mechanism> }')
    rule("<bound>", *[str(b) for b in small_bounds])
    # HKS is one of <page-segregated>'s derivations: a page_segregated heap serves every size.
    rule("<general>", '{"upto": null, <general-mechanism> }',
         *[text for name, text in PRESET_ALTERNATIVES.items() if name != "HKS"],
         '{"upto": null, "mechanism": "os"}')
    rule("<part-mechanism>", "<fits>", "<strict>", "<simple>", "<exact>", "<buddy>", '"mechanism": "kingsley"', "<region>",
         "<ps-fields>")
    rule("<general-mechanism>", "<fits>", '"mechanism": "kingsley"', '"mechanism": "lea"', '"mechanism": "adaptive_lea"',
         "<buddy>", "<region>")
    rule("<region>", '"mechanism": "region", "header": <header> , <chunk>')
    rule("<fits>", '"mechanism": "segregated_lists", "classes": <class-count> , <fit-policy>',
         f'"mechanism": "segregated_fit", "class_sizes": {classes} , <fit-policy>')
    rule("<class-count>", "4", "6", "8", "10", "12", "16")
    rule("<fit-policy>", '"list": <list> , <split> , <coalescing> , <chunk>')
    rule("<coalescing>", '"header": "boundary_tags", "coalesce": "immediate", "trim": <bool>',
         '"header": "boundary_tags", "coalesce": "deferred", "trim": <bool>',
         '"header": <header> , "coalesce": "none", "trim": false')
    rule("<split>", '"split": true', '"split": false')
    rule("<strict>", f'"mechanism": "strict_segregated_fit", "class_sizes": {classes} , "header": <header> , '
                     '"list": <list> , <chunk>',
         '"mechanism": "strict_segregated_fit", "classes": <class-count> , "header": <header> , "list": <list> , <chunk>')
    rule("<simple>", f'"mechanism": "simple_segregated_storage", "class_sizes": {classes} , "header": <header> , <chunk>')
    rule("<exact>", '"mechanism": "exact_segregated_fit", "header": <header> , "list": <exact-list> , <chunk>')
    rule("<buddy>", '"mechanism": <buddy-kind> , "min_block_bytes": 32, "area_bytes": <area> , '
                    '"coalesce": "immediate", "trim": <bool>',
         '"mechanism": <buddy-kind> , "min_block_bytes": 32, "area_bytes": <area> , "coalesce": "none", "trim": false')
    rule("<buddy-kind>", '"binary_buddy"', '"fibonacci_buddy"', '"weighted_buddy"', '"double_buddy"')
    rule("<area>", "65536", "262144", "1048576")
    rule("<list>", '{"structure": <linked> , "fit": <fit> , "order": <order> }',
         '{"structure": "size_tree", "fit": <tree-fit> , "order": "size"}')
    rule("<exact-list>", '{"structure": <linked> , "fit": "exact", "order": <order> }')
    rule("<linked>", '"singly_linked"', '"doubly_linked"')
    rule("<fit>", '"first"', '"next"', '"best"', '"exact"', '"worst"')
    rule("<tree-fit>", '"first"', '"best"', '"exact"', '"worst"')
    rule("<order>", '"lifo"', '"fifo"', '"address"')
    rule("<header>", '"size8"', '"size16"', '"boundary_tags"')
    rule("<bool>", "true", "false")
    rule("<chunk>", '"chunk": {"bytes": <chunk-bytes> , "max_bytes": 1048576, "growth": <growth> }')
    rule("<chunk-bytes>", "4096", "16384", "65536", "262144")
    rule("<growth>", "1.0", "1.5", "2.0")
    if concurrent_threads:
        rule("<dmm>", "<page-segregated>")
        rules = {name: alternatives for name, alternatives in rules.items() if name in _reachable(rules, "<dmm>")}
    return Grammar("<dmm>", rules)


def _reachable(rules: dict[str, list[list[str]]], start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for alternative in rules[todo.pop()]:
            for item in alternative:
                if item.startswith("<") and item not in seen:
                    seen.add(item)
                    todo.append(item)
    return seen


#: The policies of the page_segregated designs seeded with each fitted class list: a
#: middle ground between libheapkit.so's (fast, memory-hungry) and the smallest budgets.
FITTED_SEED_POLICIES = {
    "warm_superblocks": "16",
    "purge_delay": "512",
    "resident_free": PAGE_SEGREGATED_CHOICES["resident_free"][1],
    "large_cache": PAGE_SEGREGATED_CHOICES["large_cache"][1],
}


def fitted_alternatives(grammar: Grammar) -> dict[str, str]:
    """For each class list a generated grammar offers besides libheapkit.so's (those fitted
    to the trace), the page_segregated design with those classes and
    FITTED_SEED_POLICIES, as the grammar derives it: designs to seed a search with."""
    out = {}
    for items in grammar.rules.get("<ps-classes>", [])[1:]:
        classes = json.loads("".join(items))
        out[f"PS{len(classes)}-{len(out) + 1}"] = _page_segregated(classes, **FITTED_SEED_POLICIES)
    return out


#: The bounds under which the mixed seeds serve small requests from libheapkit.so's
#: page-segregated heap, and the rest best fit (AdaptiveLeaHeap): medium blocks pack
#: densely in a best-fit heap, where a 64 KiB superblock of them wastes its tail.
MIXED_SEED_BOUNDS = (1024, 4096)


def mixed_alternatives(grammar: Grammar) -> dict[str, str]:
    """Designs that mix libheapkit.so's speed with a best-fit heap's density, as the
    grammar derives them, to seed a search with: for each short-lived set the grammar
    offers, that set in page_segregated superblocks of its own and every other size best
    fit (``NUR-i``, placement by lifetime); and small requests page-segregated up to each
    of MIXED_SEED_BOUNDS the grammar has as a bound, the rest best fit (``MIX-b``)."""
    out = {}
    classes = "".join(grammar.rules["<ps-classes>"][0]) if "<ps-classes>" in grammar.rules else json.dumps(DEFAULT_CLASSES)
    for i, items in enumerate(grammar.rules.get("<sl-sizes>", []), 1):
        out[f"NUR-{i}"] = ('{"short_lived": ' + "".join(items) + ", " + _page_segregated_fields(classes) + "}, "
                           '{"upto": null, "mechanism": "adaptive_lea"}')
    bounds = {"".join(b) for b in grammar.rules.get("<bound>", [])}
    for bound in MIXED_SEED_BOUNDS:
        if str(bound) in bounds:
            out[f"MIX-{bound}"] = ('{"upto": ' + str(bound) + ", " + _page_segregated_fields(classes) + "}, "
                                   '{"upto": null, "mechanism": "adaptive_lea"}')
    return out


#: The numbers of classes whose fitted lists the grammar offers (capped by the trace's
#: distinct sizes), each under every weighting of :mod:`heapkit.sizeclasses`.
FITTED_CLASS_COUNTS = (8, 12, 16, 24, 32, 40, 48, 64)


def generate_for_trace(trace: str | Path) -> Grammar:
    from heapkit import sizeclasses
    from heapkit.stats import stats

    from heapkit.lifetimes import short_lived_sets
    from heapkit.stats import size_profile

    profile = stats(trace, top_sizes=24)
    small = size_profile(trace)
    histogram = sizeclasses.SizeHistogram(small["sizes"], small["counts"], small["live_at_peak"])
    fitted = sizeclasses.fitted_lists(histogram, FITTED_CLASS_COUNTS) if histogram.counts.any() else []
    return generate(profile.top_sizes, profile.max_size, [f.classes for f in fitted], short_lived_sets(small),
                    concurrent_threads=profile.concurrent_allocating_threads >= 2)


__all__ = ["FITTED_CLASS_COUNTS", "FITTED_SEED_POLICIES", "Grammar", "MIXED_SEED_BOUNDS", "fitted_alternatives",
           "mixed_alternatives", "GrammarError", "PAGE_SEGREGATED_CHOICES", "PRESET_ALTERNATIVES", "design_from_text", "generate", "generate_for_trace",
           "hot_sizes"]
