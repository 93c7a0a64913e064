"""Writing a benchmark's section of docs/benchmarks.md: the section under ``heading`` is
replaced by the new text (or appended), the rest of the page kept."""

from __future__ import annotations

import re
from pathlib import Path


def replace_section(doc: Path, heading: str, section: str, level: int = 2) -> None:
    """``level`` 3 replaces a ``###`` subsection, up to the next heading of level 2 or 3."""
    text = doc.read_text()
    marks = "#" * level
    pattern = re.compile(rf"^{marks} {re.escape(heading)}\n.*?(?=^#{{2,{level}}} |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    doc.write_text(text)
