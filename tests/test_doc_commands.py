"""A copy-paste check: every ```bash block of the README and of every tutorial page
(docs/tutorial/*.md, found by glob) runs as written, in a scratch git copy of the repository, and
leaves every committed file as it was. (The ```python blocks run in tests/test_docs.py.)

Block markers (a Markdown comment on the line before the fence):
no marker — fast: runs in plain ``make test``;
``<!-- test: integration -->`` — runs with ``-m integration`` (Flower, Ray or a whole sweep);
``<!-- not-run: reason -->`` — never run (servers, a second machine, the install itself): each
one is reported as a skipped test with its reason, so what is not checked stays visible.

Long runs are shrunk by ``FEDRR_SMOKE=1`` (the ``fedrr`` command's smoke run, named in the docs
next to the commands): the commands themselves are not rewritten."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "tutorial").glob("*.md"))]
FENCE = re.compile(
    r"(?:<!--\s*(?P<marker>[^>]*?)\s*-->[ \t]*\n)?^```(?:bash|sh|shell)[ \t]*\n(?P<code>.*?)^```", re.S | re.M
)
FAST, INTEGRATION, NOT_RUN = "", "test: integration", "not-run:"
#: the environment the commands run in, besides a PATH and PYTHONPATH into the copy
ENV = {
    "FEDRR_SMOKE": "1",
    "MPLBACKEND": "Agg",
    "FLWR_TELEMETRY_ENABLED": "0",
    "FLWR_DISABLE_UPDATE_CHECK": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0",
    "OMP_NUM_THREADS": "1",
}


class Block(NamedTuple):
    page: Path
    line: int
    marker: str
    code: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT).as_posix()}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    return [
        Block(page, text.count("\n", 0, m.start("code")), (m.group("marker") or "").strip(), m.group("code"))
        for m in FENCE.finditer(text)
    ]


ALL = [b for p in PAGES for b in blocks(p)]


def test_the_pages_have_commands():
    assert len(PAGES) >= 6 and (ROOT / "docs" / "tutorial" / "first-sweep.md") in PAGES
    assert sum(b.marker == FAST for b in ALL) >= 2
    assert sum(b.marker == INTEGRATION for b in ALL) >= 3


def test_markers_are_known_and_not_run_says_why():
    bad = [
        f"{b.where}: <!-- {b.marker} -->"
        for b in ALL
        if not (b.marker in (FAST, INTEGRATION) or (b.marker.startswith(NOT_RUN) and b.marker[len(NOT_RUN) :].strip()))
    ]
    assert not bad, "unknown block markers (or a not-run without its reason):\n" + "\n".join(bad)


@pytest.mark.parametrize("block", [b for b in ALL if b.marker.startswith(NOT_RUN)], ids=lambda b: b.where)
def test_not_run_blocks_are_reported(block):
    pytest.skip(f"{block.where}: {block.marker}")


def _copy(dst: Path) -> Path:
    """A git work tree at ``dst`` with the repository's files as they are now (tracked and
    untracked-but-not-ignored), one commit, and ``.venv`` linked to this one's."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for rel in filter(None, out.split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)
    git = ["git", "-c", "user.name=docs", "-c", "user.email=docs@localhost", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=dst, check=True)
    subprocess.run(["git", "add", "-A"], cwd=dst, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "copy"], cwd=dst, check=True)
    (dst / ".venv").symlink_to(ROOT / ".venv")
    return dst


def _run(page_blocks: list[Block], tmp_path: Path) -> None:
    work = _copy(tmp_path / "repo")
    env = {
        **os.environ,
        **ENV,
        "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(work),
    }
    for b in page_blocks:
        res = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", b.code],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert res.returncode == 0, (
            f"{b.where}: the block exited {res.returncode}\n{b.code}\n--- stdout\n{res.stdout[-3000:]}"
            f"\n--- stderr\n{res.stderr[-3000:]}"
        )
    changed = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=work, capture_output=True, text=True, check=True
    ).stdout
    assert not changed, f"the commands of {page_blocks[0].where} changed committed files:\n{changed}"


def _pages_with(marker: str) -> list[Path]:
    return [p for p in PAGES if any(b.marker == marker for b in blocks(p))]


@pytest.mark.parametrize("page", _pages_with(FAST), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_fast_commands_run_as_written(page, tmp_path):
    _run([b for b in blocks(page) if b.marker == FAST], tmp_path)


@pytest.mark.integration
@pytest.mark.flower
@pytest.mark.parametrize("page", _pages_with(INTEGRATION), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_command_runs_as_written(page, tmp_path):
    """The page's fast and integration blocks, in page order, in one copy."""
    _run([b for b in blocks(page) if b.marker in (FAST, INTEGRATION)], tmp_path)


def test_a_changed_committed_file_fails_the_check(tmp_path):
    """The check can fail: a block that rewrites a committed result is caught."""
    page = ROOT / "docs" / "tutorial" / "first-sweep.md"
    bad = Block(page, 0, FAST, "echo x >> results/quickstart/summary.md\n")
    with pytest.raises(AssertionError, match="changed committed files"):
        _run([bad], tmp_path)


def test_smoke_run_computes_the_whole_sweeps_first_cell(tmp_path, monkeypatch, capsys):
    """FEDRR_SMOKE=1: sweep computes only repeat 0 of grid point 0, with the whole sweep's values;
    run computes repeat 0 of its own grid point; reproduce reruns and compares that one cell."""
    from test_reproduce import SMALL

    from fedrr.experiment.cli import main

    cfg = tmp_path / "small.toml"
    cfg.write_text(SMALL)
    full = tmp_path / "full"
    assert main(["sweep", str(cfg), "--out", str(full), "--no-progress"]) == 0
    assert "4 cell(s) computed" in capsys.readouterr().out
    monkeypatch.setenv("FEDRR_SMOKE", "1")
    smoke = tmp_path / "smoke"
    assert main(["sweep", str(cfg), "--out", str(smoke), "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert "1 cell(s) computed" in out and "FEDRR_SMOKE=1: a smoke run: only repeat 0 of grid point 0" in err
    (cell,) = (smoke / "cells").glob("*.json")
    assert "g000" in cell.name and "r000" in cell.name, cell.name

    def values(path):  # a cell's results without its timings
        c = json.loads(path.read_text())
        return c["fingerprint"], {n: {k: v for k, v in e.items() if k != "seconds"} for n, e in c["learners"].items()}

    assert values(cell) == values(full / "cells" / cell.name)
    assert main(["run", str(cfg), "--index", "1", "--out", str(smoke), "--no-progress"]) == 0
    assert "1 cell(s) computed" in capsys.readouterr().out
    assert len(list((smoke / "cells").glob("*.json"))) == 2
    assert main(["reproduce", str(full), "--out", str(tmp_path / "again")]) == 0
    out, err = capsys.readouterr()
    assert "REPRODUCED" in out and "only repeat 0 of grid point 0 is rerun" in err
    assert len(list((tmp_path / "again" / "cells").glob("*.json"))) == 1
    monkeypatch.setenv("FEDRR_SMOKE", "0")  # "0" is off
    assert main(["sweep", str(cfg), "--out", str(smoke), "--no-progress"]) == 0
    assert "2 cell(s) computed, 2 skipped" in capsys.readouterr().out
