"""How fast one release round runs in a Flower simulation on this machine, in clients per second.

Three ways, timed in the same run (round seconds = collection only: from the first query to the
last reply; Ray start-up and node registration excluded):
* plain  — what a Flower user writes: one ``grid.send_and_receive`` to every node, Flower's own
           in-memory link state (the baseline);
* waves  — fedrr's one-node-per-client mode: a sliding window of ``wave-size`` queries and the
           per-node link-state index (``fedrr.federation.fast_linkstate``);
* cohort — nodes hosting ``cohort-size`` logical clients each (own record, generator, ledger);
           here the whole job runs (fedrr's ServerApp: collect, validate, pool, train spread-EM)
           and its training time, clean-test accuracy and end-to-end time are reported too.
Usage: python simulations/bench_federation_scale.py [--nodes 1000 5000 10000] [--plain-max 5000]
       [--cohort 100000 1000000] [--out results/federation_scale]"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedrr.federation import load_run_config, run_federation
from fedrr.federation.protocol import MESSAGE_TYPE, query_content
from fedrr.federation.server_app import collect_releases, validate_replies, wait_for_nodes

POP = "fedrr.examples:TwoBudgetSyntheticPopulation"


def _timing_app(mode: str, box: dict) -> ServerApp:
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        cfg = load_run_config(context.run_config)
        from flwr.app import Message

        from fedrr.federation.config import n_nodes

        nodes = wait_for_nodes(grid, n_nodes(cfg), 1800)
        t0 = time.perf_counter()
        if mode == "plain":
            msgs = [
                Message(content=query_content(), dst_node_id=n, message_type=MESSAGE_TYPE, group_id="r") for n in nodes
            ]
            replies = list(grid.send_and_receive(msgs, timeout=3600))
        else:
            replies, _ = collect_releases(grid, nodes, int(cfg["wave-size"]), 3600)
        secs = time.perf_counter() - t0
        valid, dropped = validate_replies(replies, None, None)
        box.update(
            nodes=len(nodes),
            replies=len(replies),
            seconds=secs,
            releases=int(sum(len(v.client_id) for v in valid)),
            dropped=dropped,
        )

    return app


def run_one(mode: str, n_clients: int, cohort: int, wave: int, client_cpus: float = 1.0) -> dict:
    box: dict = {}
    cfg = {
        "population": POP,
        "n-clients": n_clients,
        "run-mode": "cohort" if cohort > 1 else "node",
        "cohort-size": cohort,
        "wave-size": wave,
        "results-dir": "/tmp/fedrr-bench",
        "node-wait-timeout": 1800.0,
    }
    t0 = time.perf_counter()
    if mode == "cohort":  # the whole job: release, collect, validate, pool and train spread-EM
        m = run_federation({**cfg, "learners": "spread", "min-valid": 1}, client_cpus=client_cpus)
        box.update(
            nodes=m["nodes_registered"],
            replies=m["replies"],
            seconds=m["seconds_collect"],
            releases=m["n_releases"],
            dropped=m["dropped"],
            train_seconds=m["learners"]["spread"]["seconds"],
            accuracy=m["learners"]["spread"].get("accuracy"),
            total_seconds=m["seconds_total"],
        )
    else:
        run_federation(
            cfg, server_app=_timing_app(mode, box), indexed_linkstate=(mode != "plain"), client_cpus=client_cpus
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
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, nargs="*", default=[1000, 5000, 10000])
    ap.add_argument("--plain-max", type=int, default=10000, help="largest node count timed with the plain round")
    ap.add_argument("--cohort", type=int, nargs="*", default=[100000, 1000000], help="client counts in cohort mode")
    ap.add_argument("--cohort-nodes", type=int, default=100)
    ap.add_argument("--wave", type=int, default=256)
    ap.add_argument("--client-cpus", type=float, default=1.0, help="CPUs per ClientApp actor (fewer: more actors)")
    ap.add_argument("--out", default="results/federation_scale")
    args = ap.parse_args(argv)
    rows = []
    for n in args.nodes:
        if n <= args.plain_max:
            rows.append(run_one("plain", n, 1, args.wave, args.client_cpus))
        rows.append(run_one("waves", n, 1, args.wave, args.client_cpus))
    for n in args.cohort:
        rows.append(run_one("cohort", n, -(-n // args.cohort_nodes), args.wave, args.client_cpus))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    keys = [
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
    with open(out / "scale.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    lines = [
        f"command: python simulations/bench_federation_scale.py {' '.join(argv if argv is not None else sys.argv[1:])}",
        f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}",
        "",
        "| mode | clients | nodes | clients/node | releases | round seconds | clients/s | spread-EM fit s | accuracy | process wall s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        fit = f"{r['train_seconds']:.1f}" if "train_seconds" in r else ""
        acc = f"{r['accuracy']:.3f}" if r.get("accuracy") is not None else ""
        lines.append(
            f"| {r['mode']} | {r['n_clients']:,} | {r['nodes']:,} | {r['cohort_size']} | {r['releases']:,} | "
            f"{r['seconds']:.1f} | {r['clients_per_second']:,.0f} | {fit} | {acc} | {r['wall_seconds']:.0f} |"
        )
    by = {(r["mode"], r["n_clients"]): r for r in rows}
    for n in args.nodes:
        if ("plain", n) in by:
            lines.append(
                f"\nspeed-up of waves over plain at {n:,} nodes: "
                f"{by[('waves', n)]['clients_per_second'] / by[('plain', n)]['clients_per_second']:.1f}x"
            )
    text = "\n".join(lines)
    (out / "scale.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
