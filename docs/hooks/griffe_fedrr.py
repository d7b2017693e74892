"""griffe extension for the API pages: fedrr's docstrings are prose, with a few sections written as
``Title`` over a line of dashes holding ``name : description`` items. Rendered as plain Markdown
those would become headings and run-on paragraphs, so each section title becomes a bold line and
each item a bullet. Nothing else is changed (the docstrings stay as they are in the code)."""

from __future__ import annotations

import re
from typing import Any

import griffe

_ITEM = re.compile(r"^(?P<indent>\s*)(?P<names>[A-Za-z_*][\w*]*(?:\s*,\s*[A-Za-z_*][\w*]*)*)\s+:\s+(?P<text>.*)$")


def rewrite(text: str) -> str:
    lines = text.split("\n")
    out: list[str] = []
    in_section = in_item = False
    base = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.strip() and re.fullmatch(r"\s*-{3,}\s*", nxt):
            out += ["", f"**{line.strip()}**", ""]
            in_section, base = True, len(line) - len(line.lstrip())
            i += 2
            continue
        m = _ITEM.match(line) if in_section else None
        if m and len(m.group("indent")) == base:
            names = ", ".join(f"`{n.strip()}`" for n in m.group("names").split(","))
            out.append(f"- {names}: {m.group('text')}")
            in_item = True
        elif in_item and line.strip() and len(line) - len(line.lstrip()) > base:
            out.append("  " + line.strip())
        else:
            if not line.strip():
                in_section = False
            in_item = False
            out.append(line)
        i += 1
    return "\n".join(out)


class FedrrDocstrings(griffe.Extension):
    def on_instance(self, *, node: Any, obj: griffe.Object, agent: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
