"""Load with faults (issue 18): one Flower simulation of 10,000 one-client nodes with 10 % dropouts,
5 % malformed replies and 2 % fake clients completes, keeps every valid release, and reports each count.

The run: ``fedrr.federation.run_federation`` on digits 7 vs 9 (randomised response, flip 0.3 per
pixel, 0.2 on the label; rows reused beyond the 257 training records), ``dropout`` 0.1,
``fake-fraction`` 0.02 (the ``output`` attack: crafted, valid-looking releases, ``fedrr.fake``) and
``fedrr.testing.faults.faulty_client_app`` at rate 0.05 over all six fault kinds; learners naive and
majority. Every expected count is derived on the side from the same rules the clients follow, never
from the server's output:

* dropped out: not ``population.is_present(i)``. A fake client never drops out (``FakeClients``:
  present if fake or present in the base population), so the fakes the base would have dropped
  answer;
* malformed, per reason: ``reply_fault(seed, i, rate, kinds)`` of every *present* client, mapped by
  ``FAULT_KINDS`` (an absent client answers "dropped out" before any fault is drawn). A fake client
  is drawn like any other: its crafted release, corrupted, is rejected with the fault's reason;
* fake: ``population.is_fake(i)``; in the pool: the fakes that are present and not faulty;
* kept: present minus malformed. The pooled client ids must equal that set exactly, and the pooled
  releases must equal, bit for bit, ``fedrr.release.release_clients`` of those clients with the
  simulation generators (what each node released); the frequency check's verdict must equal
  ``fedrr.frequency_check.check_pool`` of that offline pool.

Writes OUT/federation_faults.{md,csv,json}; exits 1 if any count differs.

    python simulations/federation_faults.py --out results/federation_faults     # 10^4 nodes, 1-4 min (load)
    python simulations/federation_faults.py --n-clients 300 --out /tmp/faults   # ~30 s
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from fedrr.assembly import build_population
from fedrr.federation import run_federation
from fedrr.frequency_check import check_pool
from fedrr.io import atomic_write_text, command_line, markdown_table, provenance, write_csv, write_json
from fedrr.pool import Pool
from fedrr.release import client_generator, release_clients
from fedrr.run_config import RunConfig
from fedrr.testing.faults import FAULT_KINDS, faulty_client_app, reply_fault

FIELDS = ["quantity", "expected", "reported", "ok"]


def make_config(n_clients: int, results_dir: str, *, dropout: float, fake_fraction: float, seed: int) -> RunConfig:
    """The run's config: one client per node, generous timeouts for 10^4 nodes on two cores."""
    return RunConfig(
        dataset="digits_7_vs_9",
        mechanism="rr",
        feature_flip=0.3,
        label_flip=0.2,
        n_clients=n_clients,
        dropout=dropout,
        fake_fraction=fake_fraction,
        fake_attack="output",
        learners=("naive", "majority"),
        min_valid=10,
        seed=seed,
        run_mode="node",
        node_wait_timeout=1800.0,
        reply_timeout=3600.0,
        results_dir=results_dir,
        run_name="faults",
    )


def expected_counts(cfg: RunConfig, rate: float, kinds: tuple[str, ...]) -> dict:
    """What the server must report, from the clients' own rules (see the module doc)."""
    pop = build_population(cfg)
    is_fake = getattr(pop, "is_fake", lambda c: False)
    absent, fake, fake_rescued, valid = [], [], [], []
    by_reason: Counter = Counter()
    fake_by_reason: Counter = Counter()
    for c in range(cfg.n_clients):
        f = is_fake(c)
        if f:
            fake.append(c)
            if not pop.base.is_present(c):
                fake_rescued.append(c)  # the base population would have dropped it: as a fake it answers
        if not pop.is_present(c):
            absent.append(c)
            continue
        kind = reply_fault(cfg.seed, c, rate, kinds)
        if kind is None:
            valid.append(c)
        else:
            by_reason[FAULT_KINDS[kind]] += 1
            fake_by_reason[FAULT_KINDS[kind]] += f
    fake_set = set(fake)
    return {
        "population": pop,
        "absent": absent,
        "fake": fake,
        "fake_absent": sorted(set(absent) & fake_set),
        "fake_answering_though_base_absent": fake_rescued,
        "malformed_by_reason": dict(sorted(by_reason.items())),
        "fake_malformed": sum(fake_by_reason.values()),
        "valid": valid,
        "fake_valid": sorted(set(valid) & fake_set),
    }


def check_run(cfg: RunConfig, metrics: dict, pool: Pool, exp: dict) -> list[dict]:
    """Expected against reported, one row per count (``ok`` False on any difference)."""
    rows: list[dict] = []

    def row(quantity, expected, reported):
        rows.append({"quantity": quantity, "expected": expected, "reported": reported, "ok": expected == reported})

    n = cfg.n_clients
    dropped = dict(metrics["dropped"])
    row("clients (nodes registered)", n, metrics["nodes_registered"])
    row("replies (every node answers)", n, metrics["replies"])
    row("no reply by the timeout", 0, dropped.pop("no_reply", 0))
    row("dropped out", len(exp["absent"]), dropped.pop("dropped_out", 0))
    reasons = sorted(set(exp["malformed_by_reason"]) | set(dropped))
    for reason in reasons:
        row(f"malformed: {reason}", exp["malformed_by_reason"].get(reason, 0), dropped.get(reason, 0))
    row("malformed, all reasons", sum(exp["malformed_by_reason"].values()), sum(dropped.values()))
    row("fake clients", len(exp["fake"]), metrics["population"].get("fake_clients", {}).get("n_fake", 0))
    ids = pool.client_id.tolist()
    fake_set = set(exp["fake"])
    row("fake clients pooled (crafted, valid-looking)", len(exp["fake_valid"]), sum(c in fake_set for c in ids))
    row("valid releases kept (n_releases)", len(exp["valid"]), metrics["n_releases"])
    row("pooled releases", len(exp["valid"]), pool.n)
    want = set(exp["valid"])
    row("valid releases missing from the pool", 0, len(want - set(ids)))
    row("pooled releases not expected", 0, len(set(ids) - want) + (len(ids) - len(set(ids))))
    offline = release_clients(exp["population"], exp["valid"], lambda c: client_generator(cfg.seed, c))
    ref = Pool.from_releases([offline])
    same = (
        pool.n == ref.n
        and np.array_equal(pool.client_id, ref.client_id)
        and np.array_equal(pool.X, ref.X, equal_nan=pool.X.dtype.kind == "f" and ref.X.dtype.kind == "f")
        and np.array_equal(pool.y, ref.y)
        and all(a == b for a, b in zip(pool.mechanisms, ref.mechanisms))
    )
    row("pooled releases equal the clients' own (bit for bit)", True, same)
    check, ref_check = metrics["frequency_check"], check_pool(ref, cfg.check_alpha).to_dict()
    verdict = lambda c: "FLAGGED " + ", ".join(c["flagged_fields"]) if c["flagged"] else "nothing flagged"  # noqa: E731
    row(f"frequency check (α = {cfg.check_alpha:g})", verdict(ref_check), verdict(check))
    row("run status", "done", metrics["status"])
    return rows


def run(
    n_clients: int,
    *,
    rate: float = 0.05,
    dropout: float = 0.1,
    fake_fraction: float = 0.02,
    seed: int = 0,
    kinds: tuple[str, ...] = tuple(FAULT_KINDS),
    client_cpus: float = 1.0,
) -> dict:
    """One federation with faults; returns its rows, the expected counts, the metrics and times."""
    with tempfile.TemporaryDirectory(prefix="fedrr-faults-") as tmp:
        cfg = make_config(n_clients, tmp, dropout=dropout, fake_fraction=fake_fraction, seed=seed)
        t0 = time.perf_counter()
        metrics = run_federation(cfg, client_app=faulty_client_app(rate, kinds), client_cpus=client_cpus)
        wall = time.perf_counter() - t0
        pool = Pool.load(Path(tmp) / cfg.run_name / "pool.npz")
    exp = expected_counts(cfg, rate, kinds)
    rows = check_run(cfg, metrics, pool, exp)
    summary = {
        "n_clients": n_clients,
        "rate": rate,
        "kinds": list(kinds),
        "dropout": dropout,
        "fake_fraction": fake_fraction,
        "seed": seed,
        "ok": all(r["ok"] for r in rows),
        "wall_seconds": wall,
        "seconds_collect": metrics["seconds_collect"],
        "seconds_total": metrics["seconds_total"],
        "expected": {
            "dropped_out": len(exp["absent"]),
            "malformed_by_reason": exp["malformed_by_reason"],
            "fake": len(exp["fake"]),
            "fake_absent": len(exp["fake_absent"]),
            "fake_answering_though_base_absent": len(exp["fake_answering_though_base_absent"]),
            "fake_malformed": exp["fake_malformed"],
            "fake_valid": len(exp["fake_valid"]),
            "valid": len(exp["valid"]),
        },
        "metrics": {k: metrics[k] for k in ("nodes_registered", "replies", "dropped", "n_releases", "learners")},
        "frequency_check": metrics["frequency_check"],
        "config": cfg.replace(results_dir="(temporary)").to_flwr(),
    }
    return {"rows": rows, "summary": summary}


def write(result: dict, out: Path, command: str) -> str:
    """OUT/federation_faults.{csv,json,md}; returns the markdown."""
    rows, s = result["rows"], result["summary"]
    write_csv(out / "federation_faults.csv", rows, command, fields=FIELDS)
    write_json(out / "federation_faults.json", {"command": command, "written": provenance(), **s, "rows": rows})
    fmt = lambda v: f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)  # noqa: E731
    body = [[r["quantity"], fmt(r["expected"]), fmt(r["reported"]), "yes" if r["ok"] else "**NO**"] for r in rows]
    e = s["expected"]
    learners = ", ".join(f"{k} {v.get('accuracy', float('nan')):.3f}" for k, v in s["metrics"]["learners"].items())
    text = "\n".join(
        [
            f"command: {command}",
            f"written: {provenance()}",
            f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}",
            "",
            f"{s['n_clients']:,} one-client nodes; dropout {s['dropout']:g}, faulty replies at rate {s['rate']:g} "
            f"({', '.join(s['kinds'])}), fake clients {s['fake_fraction']:g} (output attack), seed {s['seed']}.",
            "",
            markdown_table(["count", "expected", "reported", "equal"], body),
            "",
            f"Fake clients: {e['fake']:,}; {e['fake_malformed']} of them sent a corrupted reply (rejected with "
            f"its fault's reason), {e['fake_valid']:,} were pooled; {e['fake_absent']} dropped out (a fake never "
            f"does: {e['fake_answering_though_base_absent']} fakes answered where the honest client would "
            "have dropped out).",
            f"Accuracy on the clean test split: {learners}.",
            f"Wall time {s['wall_seconds']:.0f} s (Ray start, node registration, collection "
            f"{s['seconds_collect']:.0f} s, validation, pooling and fits); all counts equal: "
            f"{'yes' if s['ok'] else 'NO'}.",
        ]
    )
    atomic_write_text(out / "federation_faults.md", text + "\n")
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-clients", type=int, default=10_000)
    ap.add_argument("--rate", type=float, default=0.05, help="fraction of nodes sending a corrupted reply")
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--fake-fraction", type=float, default=0.02)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--client-cpus", type=float, default=1.0, help="CPUs per ClientApp actor")
    ap.add_argument("--out", default="results/federation_faults")
    args = ap.parse_args(argv)
    command = command_line(argv)
    result = run(
        args.n_clients,
        rate=args.rate,
        dropout=args.dropout,
        fake_fraction=args.fake_fraction,
        seed=args.seed,
        client_cpus=args.client_cpus,
    )
    print(write(result, Path(args.out), command))
    bad = [r for r in result["rows"] if not r["ok"]]
    for r in bad:
        print(f"MISMATCH {r['quantity']}: expected {r['expected']}, reported {r['reported']}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
