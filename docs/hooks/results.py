"""mkdocs hook: the result figures committed under results/ become part of the site, so a page
links them as ``results/<run>/<figure>.png`` (relative to docs/) without a second copy in docs/."""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]


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
