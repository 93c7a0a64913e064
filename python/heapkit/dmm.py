"""DMM specs: a dynamic memory manager design as data (docs/dmm-spec.md).

A spec is JSON in the ``heapkit-dmm/1`` format: an ordered list of allocators, each
serving the request sizes of its range ``(min, max]``, and a fallback for larger ones.
The C++ core reads and validates it (the same code the preload library and the replayer
use), so a spec accepted here runs everywhere; every error names the field's path::

    import heapkit
    kng = heapkit.preset("KNG")
    mine = heapkit.load_spec("design.json")
    print(mine.normalized)          # every default filled in: the design's identity
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Union

from heapkit import _core
from heapkit._core import SPEC_FORMAT, SpecError

PRESETS = ("KNG", "FIB", "S10", "EXA", "LEA", "BOX", "ALEA", "HKS")
_PRESET_FILES = resources.files("heapkit") / "presets"


@dataclass(frozen=True)
class Spec:
    """A validated DMM design."""

    name: str
    description: str
    normalized: str  # canonical JSON: defaults filled in, fixed order, no name
    source: str = ""  # where it came from: a path, "preset:KNG", or "" for text

    @property
    def data(self) -> dict[str, Any]:
        return json.loads(self.normalized)

    @property
    def key(self) -> str:
        """The design's identity: equal for specs that describe the same design."""
        return hashlib.sha256(self.normalized.encode()).hexdigest()[:16]

    @property
    def allocators(self) -> list[dict[str, Any]]:
        return self.data["allocators"]

    def to_json(self, indent: int | None = 2) -> str:
        data = self.data
        document = {"format": data["format"], "name": self.name}
        if self.description:
            document["description"] = self.description
        document.update(allocators=data["allocators"], fallback=data["fallback"])
        if "short_lived" in data:
            document["short_lived"] = data["short_lived"]
        return json.dumps(document, indent=indent)


SpecLike = Union[Spec, str, Path, dict]


def parse_spec(text: str, source: str = "") -> Spec:
    """Validates spec text; raises SpecError naming the offending field."""
    parsed = _core.parse_spec(text)
    if parsed["normalized"] != text:
        # The normal form spells out what the text left to be derived (class sizes from a
        # class count, doubling from the range's start), and the simulator reads that: a
        # derived value beyond the format's limits (16 classes above 1 MiB reach 32 GiB)
        # fails here, not in the middle of a batch of simulations.
        try:
            _core.parse_spec(parsed["normalized"])
        except SpecError as error:
            raise SpecError(f"{error} (derived from the spec's other fields)") from None
    name = parsed["name"] or (Path(source).stem if source and not source.startswith("preset:") else "design")
    return Spec(name=name, description=parsed["description"], normalized=parsed["normalized"], source=source)


def load_spec(path: str | Path) -> Spec:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SpecError(f"{path}: not UTF-8 text, not a DMM spec") from None
    try:
        return parse_spec(text, str(path))
    except SpecError as error:
        raise SpecError(f"{path}: {error}") from None


def preset(name: str) -> Spec:
    """One of the shipped designs (PRESETS); its file is in heapkit/presets/."""
    key = name.upper()
    if key not in PRESETS:
        raise SpecError(f"unknown preset '{name}' (one of {', '.join(PRESETS)})")
    path = _PRESET_FILES / f"{key}.json"
    return parse_spec(path.read_text(encoding="utf-8"), f"preset:{key}")


def preset_path(name: str) -> Path:
    """The preset's file, to copy and edit."""
    preset(name)  # validates the name
    return Path(str(_PRESET_FILES / f"{name.upper()}.json"))


def as_spec(spec: SpecLike) -> Spec:
    """A Spec from a Spec, a preset name, a path to a spec file, or a dict."""
    if isinstance(spec, Spec):
        return spec
    if isinstance(spec, dict):
        return parse_spec(json.dumps(spec))
    text = str(spec)
    if isinstance(spec, str) and text.upper() in PRESETS and not Path(text).exists():
        return preset(text)
    return load_spec(text)


def schema() -> dict[str, Any]:
    """The published JSON Schema of the spec format."""
    return json.loads((resources.files("heapkit") / "schemas" / "dmm-spec.schema.json").read_text(encoding="utf-8"))


__all__ = ["PRESETS", "SPEC_FORMAT", "Spec", "SpecError", "SpecLike", "as_spec", "load_spec", "parse_spec", "preset",
           "preset_path", "schema"]
