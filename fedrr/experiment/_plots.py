"""The plots of a sweep's results: metric vs ε per record (one panel per N) and, with an N grid,
metric vs N (one panel per grid point, the clean-data oracles as horizontal reference lines; for
classification also balanced accuracy and AUC vs N); PNG and SVG, from ``results.csv``."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from ..errors import ValidationError
from ._report import HUGE_EPSILON, METRICS, _fmt_eps, _is_oracle, _learner_order, aggregate, load_table, metric_of


def _decorate(ax, xlabel: str, ylabel: str, title: str) -> None:
    """Log x-axis, labels, title, grid and (if anything was drawn) a legend."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    ax.set_xscale("log")
    data_lines = [line for line in ax.get_lines() if line.get_gid() != REFERENCE_GID]  # not the horizontal references
    xs = sorted({float(x) for line in data_lines for x in line.get_xdata() if np.isfinite(x) and x > 0})
    if 1 < len(xs) <= 12:  # label the measured points themselves; log-scale minor labels overlap
        ax.xaxis.set_major_locator(FixedLocator(xs))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _fmt_eps(v)))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8).set_zorder(100)  # above every line and fallback marker


#: each registered learner's colour and marker, the same in every plot whatever the other learners
#: (families share a hue: spread blues, naive oranges, ldp-nb greens, W-DRO reds; references grey/black)
LEARNER_STYLES = {
    "spread": ("#1f77b4", "o"),
    "spread-robust": ("#17becf", "h"),
    "spread-public": ("#08306b", "s"),  # navy squares: told apart from spread's blue circles on one plot
    "spread-plain": ("#6baed6", "p"),
    "spread-flat": ("#9ecae1", "<"),
    "spread-is": ("#08519c", ">"),
    "spread-true": ("#393b79", "*"),
    "naive": ("#ff7f0e", "s"),
    "naive-cv": ("#c46200", "d"),
    "ldp-nb": ("#2ca02c", "^"),
    "ldp-nb-normsub": ("#74c476", "1"),
    "ldp-nb-robust": ("#006d2c", "2"),
    "ldp-nb-ldprecover": ("#a1d99b", "3"),
    "ldp-sgd": ("#9467bd", "D"),
    "wdro": ("#d62728", "X"),
    "wdro-cv": ("#ff9896", "x"),
    "gauss-dro": ("#8c564b", "P"),
    "ls": ("#e377c2", "s"),
    "ridge-cv": ("#bcbd22", "d"),
    "mean": ("#7f7f7f", "v"),
    "majority": ("#7f7f7f", "v"),
    "clean": ("#000000", "P"),
    "clean-nb": ("#555555", "h"),
}
#: colours and markers a learner not in LEARNER_STYLES (a new one) gets, by a hash of its name
_FALLBACK_COLOURS = ("#e6550d", "#31a354", "#756bb1", "#636363", "#3182bd", "#dd1c77", "#a6761d", "#1b9e77")
_FALLBACK_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*", "h")


def learner_style(name: str) -> tuple[str, str]:
    """(colour, marker) of a learner: fixed by its name alone, so it is the same in every plot
    (``LEARNER_STYLES``; an unknown name: chosen by a stable hash of the name, not by position)."""
    if name in LEARNER_STYLES:
        return LEARNER_STYLES[name]
    h = int.from_bytes(hashlib.blake2b(name.encode(), digest_size=4).digest(), "little")
    return _FALLBACK_COLOURS[h % len(_FALLBACK_COLOURS)], _FALLBACK_MARKERS[(h // 8) % len(_FALLBACK_MARKERS)]


#: a fallback point: a large hollow marker with a thick edge, drawn above every line and shifted a few
#: points sideways per learner, so that it shows even where the majority line passes through it
FALLBACK_STYLE = {"linestyle": "none", "markerfacecolor": "none", "markeredgewidth": 2.0, "zorder": 30}


def _mean_band(ax, pts: list[dict], xkey: str, name: str, reps: int, index: int = 0) -> None:
    """One learner's mean line over ``pts`` (x from ``xkey``) with a ±1 sd band when repeated, in the
    learner's own colour and marker (``learner_style``); a point where the learner fell back to the
    intercept-only model in any repeat gets a large hollow marker on top (``FALLBACK_STYLE``)."""
    from matplotlib.transforms import offset_copy

    x = np.array([a[xkey] for a in pts], float)
    m = np.array([a["mean"] for a in pts])
    sd = np.array([a["sd"] for a in pts])
    colour, marker = learner_style(name)
    size = 8 - 0.6 * (index % 5)  # later learners drawn smaller, on top: overlapping markers stay visible
    ax.plot(x, m, marker=marker, markersize=size, label=name, zorder=2 + index, color=colour, **_style(name))
    fell = np.array([a.get("fell_back", 0) > 0 for a in pts])
    if fell.any():
        shift = offset_copy(ax.transData, fig=ax.figure, x=3.0 * (index % 5 - 2), units="points")
        big = {"marker": marker, "markersize": size + 5, "markeredgecolor": colour}
        ax.plot(x[fell], m[fell], transform=shift, **big, **FALLBACK_STYLE)
    if reps > 1:
        ax.fill_between(x, m - sd, m + sd, color=colour, alpha=0.2, linewidth=0)


def _style(name: str) -> dict:
    return {"linestyle": "--"} if _is_oracle(name, "accuracy") else {}


def _fallback_note(ax, agg: dict) -> None:
    if any(a.get("fell_back") for a in agg.values()):
        ax.plot([], [], marker="o", markersize=11, markeredgecolor="0.3", label="fell back", **FALLBACK_STYLE)


def plot(out: str | Path) -> list[Path]:
    """<metric>_vs_epsilon.{png,svg} (one panel per N) and, with an N grid, <metric>_vs_n.{png,svg};
    the metric is accuracy, or MSE for regression scenarios."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    cfg, table, missing = load_table(out)
    if not table:
        raise ValidationError("RESULTS_DIR", f"{str(out)!r} has no finished cells yet")
    agg = aggregate(table)
    learners = _learner_order(cfg)
    G, Ns = max(len(cfg.grid), 1), cfg.n_grid
    ylabel, stem, _ = METRICS[metric_of(cfg)]
    xlabel = (
        "ε per record (input block + label; label public: inputs only)"
        if metric_of(cfg) == "mse"
        else "ε per record (released features + label, composed)"
    )
    written = []
    reps = cfg.scenario.repeats
    band = f"mean ± sd over {reps} repeats" if reps > 1 else "1 repeat"
    fig, axes = plt.subplots(1, len(Ns), figsize=(5.2 * len(Ns), 4.0), squeeze=False)
    for j, ax in enumerate(axes[0]):
        for li, name in enumerate(learners):
            pts = sorted((agg[(g, j, name)] for g in range(G) if (g, j, name) in agg), key=lambda a: a["eps"])
            pts = [a for a in pts if a["count"]]
            if not pts:
                continue
            _mean_band(ax, pts, "eps", name, reps, li)
        _fallback_note(ax, agg)
        _decorate(ax, xlabel, ylabel, f"{cfg.name}: N = {Ns[j]:,} clients ({band})")
    top = max(a["eps"] for a in agg.values())
    if top > HUGE_EPSILON:
        fig.text(
            0.01,
            0.005,
            f"Note: ε per record up to {_fmt_eps(top)}; above {HUGE_EPSILON:g} local DP is a nominal guarantee:\n"
            "read the axis as noise size.",
            fontsize=7,
            color="0.35",
        )
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    for ext in ("png", "svg"):
        p = out / f"{stem}_vs_epsilon.{ext}"
        fig.savefig(p, dpi=120)
        written.append(p)
    plt.close(fig)
    if len(Ns) > 1:
        for metric, (m_label, m_stem) in _vs_n_metrics(cfg, table).items():
            fig = _plot_vs_n(aggregate(table, metric), learners, G, Ns, reps, m_label, metric, band)
            for ext in ("png", "svg"):
                p = out / f"{m_stem}_vs_n.{ext}"
                fig.savefig(p, dpi=120)
                written.append(p)
            plt.close(fig)
    return written


#: ``gid`` of a horizontal reference line (an oracle in a metric-vs-N panel): not a measured x
REFERENCE_GID = "reference"
#: how a clean-data oracle is named where it is drawn as a reference line
REFERENCE_LABELS = {"clean": "clean logistic regression", "clean-nb": "clean naive Bayes"}


def _vs_n_metrics(cfg, table: list[dict]) -> dict[str, tuple[str, str]]:
    """The metrics a metric-vs-N plot is drawn for: (axis label, file stem) by results column. The
    scenario's own metric (accuracy, or MSE), and for classification balanced accuracy and AUC where
    the rows have them (older results do not)."""
    metric = metric_of(cfg)
    out = {metric: METRICS[metric][:2]}
    if metric == "accuracy":
        for col, label in (("balanced_accuracy", "balanced accuracy"), ("auc", "AUC")):
            if any(r.get(col) not in (None, "") for r in table):
                out[col] = (f"test {label} (clean test split)", col)
    return out


def _plot_vs_n(agg: dict, learners: list[str], G: int, Ns: list, reps: int, ylabel: str, metric: str, band: str):
    """One panel per grid point (ε): the learners on the releases as points against N (log axis); each
    clean-data oracle as a horizontal dashed line at its value at the panel's largest N (it is refitted
    on each N's clean rows; the summary's table gives each N's value), labelled by what it is
    (``REFERENCE_LABELS``): the ceilings a learner on the releases can approach as N grows. Every
    panel spans the whole N grid (ticks at its N), finished or not, so the panels compare."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    fig, axes = plt.subplots(1, G, figsize=(5.2 * G, 4.0), squeeze=False)
    task_metric = "mse" if metric == "mse" else "accuracy"
    n_N = len(Ns)
    for g, ax in enumerate(axes[0]):
        eps_g = None
        for li, name in enumerate(learners):
            pts = [agg[(g, j, name)] for j in range(n_N) if (g, j, name) in agg and agg[(g, j, name)]["count"]]
            if not pts:
                continue
            eps_g = pts[0]["eps"]
            if _is_oracle(name, task_metric):
                colour, _ = learner_style(name)
                label = REFERENCE_LABELS.get(name, f"{name} (oracle)")
                if metric == "mse" and name == "clean":
                    label = "clean least squares"
                top = max(pts, key=lambda a: a["n"])  # the largest N: the closest to the population's own model
                label += f" (N = {top['n']:,})"
                ax.axhline(top["mean"], color=colour, linestyle="--", linewidth=1.4, label=label, gid=REFERENCE_GID)
            else:
                _mean_band(ax, pts, "n", name, reps, li)
        _fallback_note(ax, {k: a for k, a in agg.items() if k[0] == g})
        title = f"ε per record = {_fmt_eps(eps_g)} ({band})" if eps_g is not None else "no finished cell"
        _decorate(ax, "N (clients, one record each)", ylabel, title)
        ax.set_xlim(min(Ns) / 1.5, max(Ns) * 1.5)
        ax.xaxis.set_major_locator(FixedLocator([float(n) for n in Ns]))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    fig.tight_layout()
    return fig
