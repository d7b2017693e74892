"""mkdocs hook: the result figures committed under results/ become part of the site without a
second copy in docs/. A page links a figure by its real path from the page's own file (e.g.
``../results/<run>/<figure>.png`` from docs/results.md), so the link also works on GitHub; the
hook adds every results/**/*.png to the site as ``results/...`` and rewrites such links to it."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
#: the target of a Markdown link or image: ``](target)`` or ``](target "title")``
_TARGET = re.compile(r"(\]\()([^)\s#]+)")


def on_files(files, config):
    for png in sorted((ROOT / "results").rglob("*.png")):
        rel = png.relative_to(ROOT).as_posix()
        if files.get_file_from_path(rel) is None:
            files.append(
                File(
                    rel, src_dir=str(ROOT), dest_dir=config["site_dir"], use_directory_urls=config["use_directory_urls"]
                )
            )
    return files


def outside_docs(target: str, page_src_uri: str, docs_dir: Path) -> str | None:
    """The repository path of the file ``target`` names, written in the page ``page_src_uri``
    (relative to docs/), when that file is in the repository but outside docs/; else None."""
    if "://" in target or target.startswith(("/", "mailto:")):
        return None
    page_dir = posixpath.dirname(page_src_uri)
    real = (docs_dir / page_dir / target).resolve()
    try:
        real.relative_to(docs_dir.resolve())
        return None  # inside docs/: mkdocs resolves it itself
    except ValueError:
        pass
    try:
        return real.relative_to(ROOT).as_posix()
    except ValueError:
        return None


def on_page_markdown(markdown, page, config, files):
    docs_dir = Path(config["docs_dir"])

    def fix(m: re.Match) -> str:
        rel = outside_docs(m.group(2), page.file.src_uri, docs_dir)
        if rel is None or files.get_file_from_path(rel) is None:
            return m.group(0)
        return m.group(1) + posixpath.relpath(rel, posixpath.dirname(page.file.src_uri) or ".")

    return _TARGET.sub(fix, markdown)
