"""results/ holds outputs and the commands that made them (issue 44): no code, no paths of the machine
that ran them, and at most 200 files; simulations/ at most 18 scripts (the issue's targets, met)."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: a path of the machine a result was made on: its checkout, scratch space, home directories
MACHINE_PATH = re.compile(r"(?<![\w<.])/(work|tmp|home|root|Users)/")
CODE = {".py", ".sh", ".ipynb", ".bash"}
#: committed files under results/: issue 44's target (356 before step 5, 254 before the md+csv twins were cut)
MAX_FILES = 200
#: scripts in simulations/: issue 44's target (26 before its last step folded one-off investigations
#: into --part switches of the scripts that measure the same thing, and one into its docs page)
MAX_SCRIPTS = 18


def _committed() -> list[Path]:
    """The tracked files under results/ (a checkout without git: every file but the ignored outputs)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "results"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.split()
        return [ROOT / f for f in out]
    except (OSError, subprocess.CalledProcessError):
        ignored = ("results/demo/", "/cells/", "/runs/")
        return [
            p
            for p in (ROOT / "results").rglob("*")
            if p.is_file() and not any(s in p.relative_to(ROOT).as_posix() + "/" for s in ignored)
        ]


def test_results_hold_no_code():
    code = [p.relative_to(ROOT).as_posix() for p in _committed() if p.suffix in CODE]
    assert not code, f"code under results/ (a script belongs in simulations/ or benchmarks/): {code}"


def test_results_name_no_machine_paths():
    bad = []
    for p in _committed():
        try:
            text = p.read_text()
        except (UnicodeDecodeError, FileNotFoundError):  # a figure
            continue
        for i, line in enumerate(text.splitlines(), 1):
            if MACHINE_PATH.search(line):
                bad.append(f"{p.relative_to(ROOT).as_posix()}:{i}: {line.strip()[:100]}")
    assert not bad, (
        "absolute machine paths under results/ (write <repo>, <scratch>/ or a relative path):\n" + "\n".join(bad[:20])
    )


def test_results_do_not_grow_past_the_line():
    n = len(_committed())
    assert n <= MAX_FILES, f"{n} files under results/ (at most {MAX_FILES}; commit summaries, not per-run dumps)"


def test_simulations_do_not_grow_past_the_line():
    scripts = sorted(p.name for p in (ROOT / "simulations").glob("*.py"))
    assert len(scripts) <= MAX_SCRIPTS, (
        f"{len(scripts)} scripts in simulations/ (at most {MAX_SCRIPTS}; give a script that measures the same "
        f"thing as another a --part of it, or fold a one-off investigation into its docs page): {scripts}"
    )
