"""The reproduction scripts run end to end in their --quick configuration and write their outputs."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPTS = {
    "barber_fig1.py": ["fig1_bernoulli.csv", "fig1_bernoulli.png"],
}


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_script_quick_run(script, tmp_path):
    out = tmp_path / "out"
    extra = []
    proc = subprocess.run(
        [sys.executable, str(ROOT / "simulations" / script), "--quick", "--out", str(out), *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    for name in SCRIPTS[script]:
        assert (out / name).stat().st_size > 0, name
