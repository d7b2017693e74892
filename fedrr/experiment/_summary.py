"""The markdown summary of a sweep: one table per N (metric mean ± sd per learner and grid point,
with the record ε and per-field parameters), the ε axis explained, and an honest note when ε per
record is too large to mean anything. Built from ``results.csv`` (``report.load_table``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ._report import HUGE_EPSILON, METRICS, _fmt_eps, _is_oracle, _learner_order, aggregate, load_table, metric_of
from ._spec import ScenarioSpec


def _param_text(r: dict) -> str:
    if r.get("params_text"):
        return r["params_text"]
    bits = []
    if r["feature_flip"] is not None:
        bits.append(f"feature flip {r['feature_flip']:.4g}")
    if r["feature_epsilon"] is not None:
        bits.append(f"ε/feature {r['feature_epsilon']:.3g}")
    if r["label_flip"] is not None:
        bits.append(f"label flip {r['label_flip']:.3g}")
    if r["label_epsilon"] is not None:
        bits.append(f"label ε {r['label_epsilon']:.3g}")
    return ", ".join(bits) or "set by the population"


def _population_text(cfg: ScenarioSpec) -> str:
    """Who the clients are: the dataset, the table or the custom population, and whether resampled."""
    pop = cfg.population
    who = (f"table {Path(pop.table).name}" if pop.table else pop.dataset) if cfg.is_dataset else pop.population
    if cfg.resampled:
        who += f" (resampled: {pop.resample}, client i's row a function of (seed, i))"
    return who


def summary_markdown(out: str | Path) -> str:
    out = Path(out)
    cfg, table, missing = load_table(out)
    man = json.loads((out / "manifest.json").read_text())
    agg = aggregate(table)
    learners = _learner_order(cfg)
    G, Ns = max(len(cfg.grid), 1), cfg.n_grid
    reps = cfg.scenario.repeats
    lines = [f"# {cfg.name}", ""]
    if cfg.scenario.description:
        lines += [cfg.scenario.description.strip(), ""]
    pop = cfg.population
    who = _population_text(cfg)
    lines += [
        f"- population: {who}; "
        f"mechanism: {cfg.privacy.mechanism if cfg.grid_axis or pop.budget_mix else 'set by the population'}; "
        f"mode: {cfg.run.mode}; repeats: {reps}; seed: {cfg.scenario.seed}",
        f"- cells finished: {len({r['cell'] for r in table})} of {len({r['cell'] for r in table}) + len(missing)}"
        + (f" (missing: {', '.join(missing[:8])}{' …' if len(missing) > 8 else ''})" if missing else ""),
        f"- fedrr {man['versions'].get('fedrr')}, flwr {man['versions'].get('flwr')}, "
        f"git {str(man['git'].get('commit'))[:10]}"
        f"{' (dirty)' if man['git'].get('dirty') else ''}; {man['machine']['cpu_count']} CPUs",
    ]
    lines += _command_lines(man) + [""]
    cell_txt = "mean ± sd over repeats" if reps > 1 else "one repeat"
    metric = metric_of(cfg)
    fmt = METRICS[metric][2]
    lines += _by_n_tables(table, learners, G, Ns, reps, metric)
    for j, N in enumerate(Ns):
        lines += [f"## N = {N:,} clients (test {'MSE' if metric == 'mse' else 'accuracy'}, {cell_txt})", ""]
        head = (
            "| ε per record | δ per record | per-field parameters | " + " | ".join(learners) + " | releases | dropped |"
        )
        lines += [head, "|" + "---|" * (5 + len(learners))]
        for g in range(G):
            row = _grid_row(agg, table, learners, reps, fmt, g, j)
            if row is not None:
                lines.append(row)
        lines.append("")
        if metric == "accuracy":
            lines += _balanced_auc_table(agg, learners, G, j)
    fell = sum(1 for x in table if x.get("fell_back"))
    if fell:
        lines += [
            f'**Fallbacks.** "fell back k/n": in k of the n repeats the learner found no signal it could show on '
            f"held-out releases and predicted from the intercept-only model (the majority class); {fell} cell(s) "
            "in all. The plots draw such points hollow.",
            "",
        ]
    errs = sorted({(x["learner"], x["error"]) for x in table if x["error"]})
    if errs:
        lines += ["Errors:", ""] + [f"- {n}: {e[:300]}" for n, e in errs] + [""]
    if metric == "mse":
        lines += [_regression_text(cfg)]
    elif cfg.privacy.mechanism in WHOLE_RECORD_TEXT:
        lines += [WHOLE_RECORD_TEXT[cfg.privacy.mechanism](cfg)]
    else:
        lines += [
            "**ε axis.** ε per record is the basic composition of every released field's ε (D features, or "
            "with attribute sampling the m sampled ones, + the label), "
            "computed by the mechanisms' own accounting (`RecordMechanism.epsilon`); δ likewise adds up "
            + (
                "(the features are one joint Gaussian block, one field: ε_record = ε_features + ε_label, "
                "δ_record = δ). "
                if _joint(cfg)
                else "(Gaussian: D·δ per feature). "
            )
            + _split_text(cfg)
        ]
    huge = [r for r in table if r["eps_record"] > HUGE_EPSILON]
    if huge and metric == "mse":
        lines += [
            "",
            f"⚠ **Honest note:** {len({r['grid_index'] for r in huge})} grid point(s) have ε per record above "
            f"{HUGE_EPSILON:g} (up to {_fmt_eps(max(r['eps_record'] for r in huge))}): "
            "read them as 'noise of this size', "
            "not as a meaningful privacy guarantee.",
        ]
    elif huge:
        worst = max(huge, key=lambda r: r["eps_record"])
        lines += [
            "",
            f"⚠ **Honest note:** {len({r['grid_index'] for r in huge})} grid point(s) have ε per record above "
            f"{HUGE_EPSILON:g}, up to {_fmt_eps(worst['eps_record'])} (= "
            + (
                f"features {worst['eps_features']:.3g}"
                if _joint(cfg)
                else f"{worst['n_features']} features × {worst['eps_per_feature']:.3g}"
            )
            + f" + label {worst['eps_label']:.3g}). Local DP with ε that large bounds "
            "almost nothing formally (an adversary's odds may move by e^ε); read these points as 'noise of this "
            "size', not as a meaningful privacy guarantee.",
        ]
    if metric == "mse" and "clean" in learners:
        lines += [
            "",
            "The oracle `clean` (dashed in the plots) is least squares on the clean records of the same clients; "
            "it sits outside the federation.",
        ]
    elif any(_is_oracle(n, "accuracy") for n in learners):
        lines += [
            "",
            "Oracles (dashed in the plots) see clean data and sit outside the federation: `clean` = logistic "
            "regression on the clean records of the clients that released; "
            + (
                "`clean-nb` = categorical naive Bayes on the same clean records (the ceiling of every naive-Bayes "
                "learner); "
                if "clean-nb" in learners
                else ""
            )
            + "`spread-true` = spread-EM on the releases with the clean records' own per-feature prior.",
        ]
    return "\n".join(lines) + "\n"


def _command_lines(man: dict) -> list[str]:
    """The sweep's command and the wall time of its last run (started_at to finished_at), saying when
    the sweep was resumed (the earlier runs' cells are not in that time), when the manifest has them."""
    from datetime import datetime

    out = []
    if man.get("command"):
        out.append(f"- command: `{' '.join(map(str, man['command']))}`")
    start, end, first = man.get("started_at"), man.get("finished_at"), man.get("first_started_at")
    if start and end:
        secs = (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
        resumed = f"; resumed: first started {first}" if first and first != start else ""
        out.append(f"- wall time of the run: {secs / 60:.1f} min ({start} to {end}{resumed})")
    return out


def _by_n_tables(table: list[dict], learners: list, G: int, Ns: list, reps: int, metric: str) -> list[str]:
    """With an N grid (classification), per grid point (ε) one table with a row per N and a column per
    learner: test accuracy / balanced accuracy / AUC (means over repeats): how many people buy how much
    accuracy at that ε."""
    if metric != "accuracy" or len(Ns) < 2:
        return []
    aggs = {m: aggregate(table, m) for m in ("accuracy", "balanced_accuracy", "auc")}
    mean_txt = "means over repeats" if reps > 1 else "one repeat"
    lines = []
    for g in range(G):
        rows = []
        eps = None
        for j, N in enumerate(Ns):
            cells = []
            for n in learners:
                vals = [aggs[m].get((g, j, n)) for m in aggs]
                if eps is None and vals[0] is not None:
                    eps = vals[0]["eps"]
                cells.append(
                    " / ".join("–" if a is None or not a["count"] else f"{a['mean']:.3f}" for a in vals)
                    + (f" (fell back {vals[0]['fell_back']})" if vals[0] and vals[0].get("fell_back") else "")
                )
            if any(c != "– / – / –" for c in cells):
                rows.append(f"| {N:,} | " + " | ".join(cells) + " |")
        if not rows:
            continue
        lines += [
            f"## ε per record = {_fmt_eps(eps)}: by N (test accuracy / balanced accuracy / AUC, {mean_txt})",
            "",
            "| N | " + " | ".join(learners) + " |",
            "|" + "---|" * (1 + len(learners)),
            *rows,
            "",
        ]
    return lines


def _grid_row(agg: dict, table: list, learners: list, reps: int, fmt: str, g: int, j: int) -> str | None:
    """The table row of grid point g at the j-th N (None: no learner has a cell there)."""
    first = next((agg[(g, j, n)] for n in learners if (g, j, n) in agg), None)
    if first is None:
        return None
    r = first["row"]
    cells_txt = []
    for n in learners:
        a = agg.get((g, j, n))
        if a is None or not a["count"]:
            cells_txt.append("error" if a and a["errors"] else "–")
        else:
            cells_txt.append(
                fmt.format(a["mean"])
                + (" ± " + fmt.format(a["sd"]) if reps > 1 else "")
                + (f" (fell back {a['fell_back']}/{a['count']})" if a.get("fell_back") else "")
            )
    rel = [x["n_releases"] for x in table if x["grid_index"] == g and x["n_index"] == j and x["learner"] == learners[0]]
    drp = [x["dropped"] for x in table if x["grid_index"] == g and x["n_index"] == j and x["learner"] == learners[0]]
    eps_txt = _fmt_eps(first["eps"]) + (" ⚠" if first["eps"] > HUGE_EPSILON else "")
    if r["eps_record_max"] - r["eps_record_min"] > 1e-9 * r["eps_record_max"]:
        eps_txt += f" (mean; {_fmt_eps(r['eps_record_min'])}–{_fmt_eps(r['eps_record_max'])})"
    return (
        f"| {eps_txt} | {first['delta']:.2g} | {_param_text(r)} | "
        + " | ".join(cells_txt)
        + f" | {np.mean(rel):,.0f} | {np.mean(drp):,.0f} |"
    )


def _balanced_auc_table(agg: dict, learners: list, G: int, j: int) -> list[str]:
    """Balanced accuracy / AUC per grid point and learner (means over repeats), when the rows have them."""
    rows = []
    for g in range(G):
        cells = [agg.get((g, j, n)) for n in learners]
        first = next((a for a in cells if a is not None), None)
        txt = [
            " / ".join("–" if a is None or a[k] is None else f"{a[k]:.3f}" for k in ("balanced_accuracy", "auc"))
            for a in cells
        ]
        if first is not None and any(t != "– / –" for t in txt):
            rows.append(f"| {_fmt_eps(first['eps'])} | " + " | ".join(txt) + " |")
    if not rows:
        return []
    head = ["Balanced accuracy / AUC (means over repeats):", "", "| ε per record | " + " | ".join(learners) + " |"]
    return head + ["|" + "---|" * (1 + len(learners))] + rows + [""]


def _regression_text(cfg: ScenarioSpec) -> str:
    priv = cfg.privacy
    mech = priv.mechanism
    cal = f" ({priv.calibration} calibration)" if mech == "gaussian" else ""
    text = (
        f"**ε axis.** Each client releases its whole input vector in [0, 1]^p through one {mech} mechanism{cal} "
        "(Farokhi 2020, Thm 1). "
    )
    if priv.label_public:
        text += (
            "⚠ **The label is public**: the target is released in the clear, as in the paper (ỹ = y), so ε per "
            "record covers the inputs only and the target is not protected at all. "
        )
    else:
        s = priv.split
        text += (
            f"The record budget is split {s['features']:g} to the input block and {s['label']:g} to the target "
            "(Laplace noise on y in [0, 1]). "
        )
    if mech == "gaussian" and priv.calibration == "farokhi":
        text += (
            "Farokhi's calibration (Δ = p_x, σ = √(2 ln(1.25/δ))·Δ/ε at any ε) states a nominal ε; the x-axis is "
            "the larger of that and the exact ε of the noise at the same δ (`GaussianMechanism.epsilon_exact`, kept "
            "as `exact_features` in each cell file), so it is a valid bound either way. "
        )
    return text + "Learners are scored by test mean squared error on a clean held-out split (lower is better)."


def _joint(cfg: ScenarioSpec) -> bool:
    """The features are one joint Gaussian block (``privacy.gaussian_noise = "joint"``)."""
    return cfg.privacy.mechanism == "gaussian" and cfg.privacy.gaussian_noise == "joint"


def _paired_text(cfg: ScenarioSpec) -> str:
    """The ε axis of a paired release (mechanism "paired"): no split, no label budget."""
    m = cfg.privacy.n_sampled or 1
    pairs = f"{m} sampled (attribute, label) pair{'s' if m > 1 else ''}"
    grid = (
        "The grid is ε_record, all of it to the pairs"
        + (f" (ε_record / {m} each)" if m > 1 else "")
        + "; the label has no budget of its own (the eps_label column is 0)."
        if cfg.grid_axis == "epsilon_grid"
        else "`population.budget_mix` draws each client's ε_record from the mix; the x-axis is the mean over the pool."
        if cfg.population.budget_mix
        else "The population sets each client's budget; the x-axis is the mean ε per record over the pool."
    )
    return (
        f"**ε axis.** Each client releases {pairs}, each one value x_j·C + y of the product domain through a "
        "frequency oracle (k-RR, OUE or OLH, the least-variance one for that domain); ε per record is the sum of "
        f"the {m} largest pair-oracle ε (`PairedRecordMechanism.epsilon`), δ = 0. " + grid
    )


def _triple_text(cfg: ScenarioSpec) -> str:
    """The ε axis of a triple release (mechanism "triple"): the whole ε to one report, no label budget."""
    grid = (
        "The grid is ε_record, all of it to the triple; the label has no budget of its own (the eps_label column is 0)."
        if cfg.grid_axis == "epsilon_grid"
        else "The population sets each client's budget; the x-axis is the mean ε per record over the pool."
    )
    return (
        "**ε axis.** Each client releases one (attribute, attribute, label) triple, its two attributes drawn "
        "uniformly among the pairs, as one value of the product domain through the least-variance frequency "
        "oracle at ε_record (`TripleRecordMechanism.epsilon`), δ = 0. " + grid
    )


def _auto_text(cfg: ScenarioSpec) -> str:
    """The ε axis of a planned release (mechanism "auto"): the whole ε_record to the plan's design."""
    return (
        "**ε axis.** Each client releases with the release planner's design for the cell's ε_record and n_clients "
        "(`fedrr.planning.plan_release`: the triple where the attributes' dependence is identified, else the "
        "least-variance paired or split design); ε per record is that mechanism's own accounting. Each cell's "
        "`population.release_plans` names the design."
    )


#: the ε axis's text of each whole-record mechanism family
WHOLE_RECORD_TEXT = {"paired": _paired_text, "triple": _triple_text, "auto": _auto_text}


def _split_text(cfg: ScenarioSpec) -> str:
    if cfg.grid_axis == "epsilon_grid":
        s = cfg.privacy.split
        share = (
            f"the joint Gaussian block on all features gets {s['features']:g}·ε_record"
            if _joint(cfg)
            else f"ε per feature = {s['features']:g}·ε_record / "
            + (
                f"{cfg.privacy.n_sampled} (each client releases {cfg.privacy.n_sampled} sampled feature(s))"
                if cfg.privacy.n_sampled
                else "D"
            )
        )
        return (
            f"The grid is a record budget ε_record split {s['features']:g} to the features ({share}) and "
            f"{s['label']:g} to the label; for randomised response ε is converted "
            "to a flip probability by `RandomizedResponse(k, epsilon=...)`."
        )
    if cfg.grid_axis == "feature_flip_grid":
        return "The grid sets the flip probability per feature; the x-axis is the resulting ε per record."
    if cfg.grid_axis == "feature_epsilon_grid":
        what = "ε of the joint Gaussian block on all features" if _joint(cfg) else "ε per feature"
        return f"The grid sets {what}; the x-axis is the resulting ε per record."
    if cfg.population.budget_mix:
        return (
            "`population.budget_mix` draws each client's feature budget from the mix; the x-axis is the mean ε per "
            "record over the pool (its range in brackets)."
        )
    return "The population sets each client's budget; the x-axis is the mean ε per record over the pool."
