"""Writing a benchmark's section of docs/benchmarks.md: the section under ``heading`` is
replaced by the new text (or appended), the rest of the page kept."""

from __future__ import annotations

import re
from pathlib import Path


def replace_section(doc: Path, heading: str, section: str) -> None:
    text = doc.read_text()
    pattern = re.compile(rf"^## {re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    doc.write_text(text)
