"""How fast one release round runs in a Flower simulation on this machine, in clients per second.

Three ways, timed in the same run (round seconds = collection only: from the first query to the
last reply; Ray start-up and node registration excluded):
* plain  — what a Flower user writes: one ``grid.send_and_receive`` to every node, with Flower's own
           in-memory link state (the baseline);
* waves  — fedrr's one-node-per-client mode: a sliding window of ``wave-size`` queries
           (``fedrr.federation.collect_releases``) and the link state indexed by node;
* cohort — nodes hosting ``cohort-size`` logical clients each (own record, generator, ledger);
           here the whole job runs (fedrr's ServerApp: collect, validate, pool, train spread-EM)
           and its training time, clean-test accuracy and end-to-end time are reported too.
The population is ``fedrr.examples:TwoBudgetSyntheticPopulation``. Writes scale.csv and scale.md.

    python benchmarks/bench_federation_scale.py --nodes 1000 5000 10000 --cohort 1000000 --out results/federation_scale
    python benchmarks/bench_federation_scale.py --nodes 300 --cohort 20000 --out /tmp/scale   # ~1-2 min
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from flwr.app import Context, Message
from flwr.serverapp import Grid, ServerApp

from fedrr.assembly import build_population
from fedrr.federation import (
    MESSAGE_TYPE,
    ServerSchema,
    collect_releases,
    query_content,
    run_federation,
    validate_replies,
    wait_for_nodes,
)
from fedrr.io import atomic_write_text, command_line, markdown_table, provenance, write_csv
from fedrr.run_config import RunConfig

POP = "fedrr.examples:TwoBudgetSyntheticPopulation"
FIELDS = [
    "mode",
    "n_clients",
    "nodes",
    "cohort_size",
    "wave_size",
    "client_cpus",
    "releases",
    "seconds",
    "clients_per_second",
    "train_seconds",
    "accuracy",
    "total_seconds",
    "wall_seconds",
]


def timing_app(mode: str, box: dict) -> ServerApp:
    """A ServerApp that only collects one release per node ("plain" or in "waves") and times it."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        cfg = RunConfig.from_flwr(context.run_config)
        nodes = wait_for_nodes(grid, cfg.n_nodes, cfg.node_wait_timeout)
        t0 = time.perf_counter()
        if mode == "plain":
            msgs = [
                Message(content=query_content(), dst_node_id=n, message_type=MESSAGE_TYPE, group_id="r") for n in nodes
            ]
            replies = list(grid.send_and_receive(msgs, timeout=3600))
        else:
            replies, _ = collect_releases(grid, nodes, cfg.wave_size, 3600)
        secs = time.perf_counter() - t0
        valid, dropped = validate_replies(replies, ServerSchema.of_population(build_population(cfg)), None)
        box.update(
            nodes=len(nodes),
            replies=len(replies),
            seconds=secs,
            releases=int(sum(len(v.client_id) for v in valid)),
            dropped=dropped,
        )

    return app


def run_one(mode: str, n_clients: int, cohort: int, wave: int, results_dir: str, client_cpus: float = 1.0) -> dict:
    """One timed round (or, for "cohort", one whole federated job); returns its row."""
    box: dict = {}
    cfg = RunConfig(
        population=POP,
        n_clients=n_clients,
        run_mode="cohort" if cohort > 1 else "node",
        cohort_size=cohort,
        wave_size=wave,
        results_dir=results_dir,
        node_wait_timeout=1800.0,
        run_name=f"{mode}-{n_clients}",
    )
    t0 = time.perf_counter()
    if mode == "cohort":  # the whole job: release, collect, validate, pool and train spread-EM
        m = run_federation(cfg.replace(learners=("spread",), min_valid=1), client_cpus=client_cpus)
        spread = m["learners"]["spread"]
        box.update(
            nodes=m["nodes_registered"],
            replies=m["replies"],
            seconds=m["seconds_collect"],
            releases=m["n_releases"],
            dropped=m["dropped"],
            train_seconds=spread["seconds"],
            accuracy=spread.get("accuracy"),
            total_seconds=m["seconds_total"],
        )
    else:
        run_federation(
            cfg, server_app=timing_app(mode, box), indexed_linkstate=(mode != "plain"), client_cpus=client_cpus
        )
    box.update(
        client_cpus=client_cpus,
        mode=mode,
        n_clients=n_clients,
        cohort_size=cohort,
        wave_size=wave,
        wall_seconds=time.perf_counter() - t0,
        clients_per_second=box["releases"] / box["seconds"],
    )
    print(json.dumps(box), flush=True)
    return box


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, nargs="*", default=[1000, 5000, 10000])
    ap.add_argument("--plain-max", type=int, default=10000, help="largest node count timed with the plain round")
    ap.add_argument("--cohort", type=int, nargs="*", default=[100000, 1000000], help="client counts in cohort mode")
    ap.add_argument("--cohort-nodes", type=int, default=100)
    ap.add_argument("--wave", type=int, default=256)
    ap.add_argument("--client-cpus", type=float, default=1.0, help="CPUs per ClientApp actor (fewer: more actors)")
    ap.add_argument("--out", default="results/federation_scale")
    args = ap.parse_args(argv)
    command, out, rows = command_line(argv), Path(args.out), []
    with tempfile.TemporaryDirectory(prefix="fedrr-bench-") as tmp:
        for n in args.nodes:
            if n <= args.plain_max:
                rows.append(run_one("plain", n, 1, args.wave, tmp, args.client_cpus))
            rows.append(run_one("waves", n, 1, args.wave, tmp, args.client_cpus))
        for n in args.cohort:
            rows.append(run_one("cohort", n, -(-n // args.cohort_nodes), args.wave, tmp, args.client_cpus))
    write_csv(out / "scale.csv", rows, command, fields=FIELDS)
    body = [
        [
            r["mode"],
            f"{r['n_clients']:,}",
            f"{r['nodes']:,}",
            r["cohort_size"],
            f"{r['releases']:,}",
            f"{r['seconds']:.1f}",
            f"{r['clients_per_second']:,.0f}",
            f"{r['train_seconds']:.1f}" if "train_seconds" in r else "",
            f"{r['accuracy']:.3f}" if r.get("accuracy") is not None else "",
            f"{r['wall_seconds']:.0f}",
        ]
        for r in rows
    ]
    lines = [
        f"command: {command}",
        f"written: {provenance()}",
        f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}",
        "",
        markdown_table(
            [
                "mode",
                "clients",
                "nodes",
                "clients/node",
                "releases",
                "round seconds",
                "clients/s",
                "spread-EM fit s",
                "accuracy",
                "process wall s",
            ],
            body,
        ),
    ]
    by = {(r["mode"], r["n_clients"]): r for r in rows}
    for n in args.nodes:
        if ("plain", n) in by:
            speedup = by[("waves", n)]["clients_per_second"] / by[("plain", n)]["clients_per_second"]
            lines.append(f"\nspeed-up of waves over plain at {n:,} nodes: {speedup:.1f}x")
    text = "\n".join(lines)
    atomic_write_text(out / "scale.md", text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
