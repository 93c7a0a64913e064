"""What ``heapkit tune`` recommends, from a race of the program under each allocator.

The rule, on the race's measured front (:meth:`heapkit.race.RaceResult.front`: the
allocators that ran the program as glibc did and that no other allocator dominated with
the race's confidence), by the preference:

- ``time``: the least median CPU time; among the allocators the race found tied with it
  on time, the least peak RSS;
- ``memory``: the least median peak RSS; among those tied with it on RSS, the least time;
- ``balanced`` (the default): the least product of the two medians, each over the best on
  the front (so 5% less time is worth 5% more memory, whatever the units).

An allocator on the front whose medians another front member beats on both axes (a pair
the race could not separate within its budget) is passed over. A design is recommended
only when it beats the best peer (the peer the same rule picks among the peers) measurably:
less on one axis, with the race's confidence; a design the race cannot tell from that
peer is no reason to leave an allocator off the shelf. The recommendation is therefore
never dominated by any allocator measured in the race, peers included. When it is a peer,
no design heapkit built beats the best off-the-shelf allocator for this program, and the
recommendation says so in one line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

from heapkit.race import AXES, RaceResult, Standing

PREFERENCES = ("balanced", "time", "memory")


@dataclass(frozen=True)
class Recommendation:
    name: str
    kind: str  # "design" (built by heapkit for this program) or "peer"
    prefer: str
    cpu_seconds: float
    peak_rss: int
    front: list[str]  # the measured front, fastest first
    line: str  # the one line to print
    reference: Optional[str] = None
    time_ratio: float = math.nan  # over the reference's, paired medians
    rss_ratio: float = math.nan
    best_peer: Optional[str] = None  # the peer the same rule picks among peers alone
    dominated_by: list[str] = field(default_factory=list)  # empty, by construction; kept to be checked

    @property
    def is_design(self) -> bool:
        return self.kind == "design"


class RecommendationError(RuntimeError):
    pass


def _median_dominates(a: Standing, b: Standing) -> bool:
    va, vb = [a.median(x) for x in AXES], [b.median(x) for x in AXES]
    return all(x <= y for x, y in zip(va, vb)) and any(x < y for x, y in zip(va, vb))


def choose(race: RaceResult, candidates: list[Standing], prefer: str) -> Standing:
    """The preferred standing among ``candidates`` (members of the measured front)."""
    if prefer not in PREFERENCES:
        raise ValueError(f"unknown preference {prefer!r}: choose from {', '.join(PREFERENCES)}")
    if not candidates:
        raise RecommendationError("no allocator ran the program as glibc did")
    # Pairs the race left open may still show one beaten on both medians: pass it over.
    clear = [s for s in candidates if not any(_median_dominates(o, s) for o in candidates if o is not s)] or candidates
    if prefer == "balanced":
        best_time = min(s.cpu_seconds for s in clear)
        best_rss = min(s.peak_rss for s in clear)
        return min(clear, key=lambda s: (s.cpu_seconds / best_time * s.peak_rss / max(best_rss, 1), s.cpu_seconds))
    axis, other = ("cpu_seconds", "peak_rss") if prefer == "time" else ("peak_rss", "cpu_seconds")
    best = min(clear, key=lambda s: (s.median(axis), s.median(other)))
    tied = [s for s in clear if s is best or race.compare(s.name, best.name, axis).outcome == "tied"]
    return min(tied, key=lambda s: (s.median(other), s.median(axis)))


def recommend(race: RaceResult, prefer: str = "balanced") -> Recommendation:
    """The recommendation from a program's race (see the module's docstring)."""
    front = race.front()
    chosen = choose(race, front, prefer)
    # The best peer by the same rule, among the peers alone (their own front).
    peers = [s for s in race.standings if s.kind == "peer" and not s.disqualified and s.runs()]
    peer_front = [s for s in peers if not any(race.dominates(o.name, s.name) for o in peers)]
    best_peer = choose(race, peer_front, prefer) if peer_front else None
    if chosen.kind == "design" and best_peer is not None and best_peer in front and not any(
            race.compare(chosen.name, best_peer.name, axis).outcome == "less" for axis in AXES):
        chosen = best_peer  # the design is not measurably better than the best peer
    reference = race.reference
    time_ratio = rss_ratio = math.nan
    if reference and reference != chosen.name:
        time_ratio = race.compare(chosen.name, reference, "cpu_seconds").ratio
        rss_ratio = race.compare(chosen.name, reference, "peak_rss").ratio
    elif reference:
        time_ratio = rss_ratio = 1.0
    figures = (f"{chosen.cpu_seconds:.3f} s CPU, peak RSS {chosen.peak_rss / 2**20:.1f} MiB"
               + (f" ({time_ratio:.2f}x {reference}'s time, {rss_ratio:.2f}x its peak RSS)"
                  if reference and reference != chosen.name else ""))
    if chosen.kind == "design":
        line = f"recommended (--prefer {prefer}): {chosen.name}, a design built for this program: {figures}"
    else:
        line = (f"no design heapkit built beats {chosen.name} on this program (--prefer {prefer}): "
                f"recommended: {chosen.name}: {figures}")
    return Recommendation(chosen.name, chosen.kind, prefer, chosen.cpu_seconds, chosen.peak_rss,
                          [s.name for s in front], line, reference, time_ratio, rss_ratio,
                          best_peer.name if best_peer else None, race.dominated_by(chosen.name))


__all__ = ["PREFERENCES", "Recommendation", "RecommendationError", "choose", "recommend"]
