"""The scale report on a tiny synthetic results table (no sweep): per ε a table with a row per N and a
column per learner (accuracy / balanced accuracy / AUC), the command and wall time from the manifest,
and metric-vs-N plots with one panel per ε, a log N axis, the learners on releases as points and the
clean-data oracles as labelled horizontal reference lines at their largest N's value."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fedrr.experiment import parse_scenario
from fedrr.experiment._plots import REFERENCE_GID, _plot_vs_n, plot
from fedrr.experiment._report import CSV_COLUMNS, aggregate, write_csv
from fedrr.experiment._summary import summary_markdown

LEARNERS = ["spread", "ldp-nb", "majority", "clean", "clean-nb"]
CONFIG = {
    "scenario": {"name": "tiny_scale", "repeats": 1},
    "population": {"dataset": "adult_binned", "n_clients": [1000, 10_000, 100_000], "resample": "bootstrap"},
    "privacy": {"mechanism": "auto", "epsilon_grid": [1, 2]},
    "learners": {"names": LEARNERS, "encoding": "onehot"},
}
NS = CONFIG["population"]["n_clients"]


def _value(g: int, j: int, learner: str, metric: str) -> float:
    """A distinct made-up score per (ε index g, N index j, learner, metric), so a misplaced cell shows."""
    base = {"accuracy": 0.70, "balanced_accuracy": 0.60, "auc": 0.80}[metric]
    return round(base + 0.01 * LEARNERS.index(learner) + 0.001 * j + 0.0001 * g, 4)


def _results_dir(tmp_path: Path) -> Path:
    cfg = parse_scenario(CONFIG)
    out = tmp_path / "tiny_scale"
    out.mkdir()
    manifest = {
        "config": CONFIG,
        "config_path": "configs/tiny_scale.toml",
        "versions": {"fedrr": "0", "flwr": "0"},
        "git": {"commit": "0" * 40, "dirty": False},
        "machine": {"cpu_count": 2},
        "command": ["fedrr", "sweep", "configs/tiny_scale.toml", "--out", "results/tiny_scale"],
        "started_at": "2026-12-02T01:00:00",
        "first_started_at": "2026-12-02T01:00:00",
        "finished_at": "2026-12-02T01:45:30",
    }
    (out / "manifest.json").write_text(json.dumps(manifest))
    table = []
    for c in cfg.cells():
        g, j = c.g, c.n
        for name in LEARNERS:
            row = dict.fromkeys(CSV_COLUMNS)
            row.update(
                scenario="tiny_scale", cell=c.key, grid_index=g, n_index=j, repeat=0, seed=0, mode="cohort",
                mechanism="auto", grid_axis="epsilon", grid_value=float(g + 1), eps_record=float(g + 1),
                eps_record_min=float(g + 1), eps_record_max=float(g + 1), delta_record=0.0, n_clients=NS[j],
                n_releases=NS[j], dropped=0, learner=name, oracle=name.startswith("clean"), metric="accuracy",
                error="", fell_back=False,
                **{m: _value(g, j, name, m) for m in ("accuracy", "balanced_accuracy", "auc")},
            )  # fmt: skip
            table.append(row)
    write_csv(out / "results.csv", table)
    return out


def test_the_summary_has_one_table_per_epsilon_with_a_row_per_n(tmp_path):
    md = summary_markdown(_results_dir(tmp_path))
    assert "- command: `fedrr sweep configs/tiny_scale.toml --out results/tiny_scale`" in md
    assert "- wall time of the run: 45.5 min" in md and "resumed" not in md
    for g, eps in enumerate(("1", "2")):
        head = f"## ε per record = {eps}: by N (test accuracy / balanced accuracy / AUC, one repeat)"
        assert head in md
        section = md.split(head, 1)[1].split("\n## ", 1)[0]
        assert "| N | spread | ldp-nb | majority | clean | clean-nb |" in section
        for j, N in enumerate(NS):
            cells = [" / ".join(f"{_value(g, j, n, m):.3f}" for m in ("accuracy", "balanced_accuracy", "auc"))
                     for n in LEARNERS]  # fmt: skip
            assert f"| {N:,} | " + " | ".join(cells) + " |" in section
    # the per-N tables of every sweep are still there, after the per-ε ones
    assert md.index("## ε per record = 2: by N") < md.index("## N = 1,000 clients")
    assert "`clean-nb` = categorical naive Bayes" in md


def test_vs_n_plots_draw_the_oracles_as_labelled_horizontal_lines(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = _results_dir(tmp_path)
    written = {p.name for p in plot(out)}
    assert {f"{m}_vs_n.{e}" for m in ("accuracy", "balanced_accuracy", "auc") for e in ("png", "svg")} <= written
    from fedrr.experiment._report import load_table

    _, table, missing = load_table(out)
    assert not missing
    for metric in ("accuracy", "auc"):
        fig = _plot_vs_n(aggregate(table, metric), LEARNERS, 2, NS, 1, "y", metric, "1 repeat")
        axes = fig.axes[:2]
        assert len(axes) == 2  # one panel per ε
        for g, ax in enumerate(axes):
            assert ax.get_xscale() == "log" and ax.get_title().startswith(f"ε per record = {g + 1}")
            refs = {line.get_label(): line for line in ax.get_lines() if line.get_gid() == REFERENCE_GID}
            top = f" (N = {NS[-1]:,})"
            assert set(refs) == {"clean logistic regression" + top, "clean naive Bayes" + top}
            for name, label in (("clean", "clean logistic regression"), ("clean-nb", "clean naive Bayes")):
                y = refs[label + top].get_ydata()
                assert np.allclose(y, _value(g, len(NS) - 1, name, metric))  # horizontal, at the largest N
            points = {line.get_label(): line for line in ax.get_lines() if line.get_label() in LEARNERS}
            assert set(points) == {"spread", "ldp-nb", "majority"}  # the oracles are not drawn as points
            np.testing.assert_allclose(points["spread"].get_xdata(), NS)
            np.testing.assert_allclose(points["spread"].get_ydata(), [_value(g, j, "spread", metric) for j in range(3)])
            assert sorted(ax.get_xticks()) == pytest.approx(NS)  # the measured N, not the lines' axes coords
        plt.close(fig)
