"""Load with faults (issue 18): a Flower simulation with dropouts, malformed replies and fake clients
completes, keeps every valid release and reports each count exactly (``simulations/federation_faults.py``,
whose own checks are asserted here, next to counts derived from the raw per-client draws)."""

from __future__ import annotations

from collections import Counter

import pytest
from conftest import load_simulation

from fedrr.pool import Pool
from fedrr.population import unit_uniform
from fedrr.release import client_generator, release_clients
from fedrr.testing.faults import FAULT_KINDS, reply_fault

#: at 300 clients seed 17 has every interaction: fakes the base population would have dropped (3),
#: a fake whose reply is corrupted (1), and all six fault reasons among the present clients
SEED = 17


def raw_expectation(n: int, seed: int, dropout: float = 0.1, fake: float = 0.02, rate: float = 0.05) -> dict:
    """The counts from the per-client draws themselves (``unit_uniform`` streams "fake", "dropout";
    ``reply_fault``), not from the population objects the script uses."""
    kinds = tuple(FAULT_KINDS)
    is_fake = [unit_uniform(seed, c, "fake") < fake for c in range(n)]
    present = [is_fake[c] or unit_uniform(seed, c, "dropout") >= dropout for c in range(n)]
    faults = {c: reply_fault(seed, c, rate, kinds) for c in range(n) if present[c]}
    dropped = Counter(FAULT_KINDS[k] for k in faults.values() if k)
    dropped["dropped_out"] = present.count(False)
    valid = [c for c, k in faults.items() if k is None]
    return {
        "dropped": dict(dropped),
        "valid": valid,
        "fake": sum(is_fake),
        "fake_valid": sum(is_fake[c] for c in valid),
        "fake_malformed": sum(is_fake[c] for c, k in faults.items() if k),
        "rescued": sum(f and unit_uniform(seed, c, "dropout") < dropout for c, f in enumerate(is_fake)),
    }


@pytest.fixture(scope="module")
def small_run():
    return load_simulation("federation_faults").run(300, seed=SEED)


def test_every_count_is_reported_exactly(small_run):
    s, rows = small_run["summary"], small_run["rows"]
    assert [r["quantity"] for r in rows if not r["ok"]] == []
    raw = raw_expectation(300, SEED)
    assert raw["rescued"] == 3 and raw["fake_malformed"] == 1 and len(raw["dropped"]) == 7  # the interactions occur
    assert s["metrics"]["dropped"] == raw["dropped"]  # no "no_reply", nothing unexpected
    assert s["metrics"]["n_releases"] == len(raw["valid"]) == 300 - sum(raw["dropped"].values())
    assert s["metrics"]["nodes_registered"] == s["metrics"]["replies"] == 300
    e = s["expected"]
    assert (e["fake"], e["fake_valid"], e["fake_malformed"], e["fake_absent"]) == (
        raw["fake"],
        raw["fake_valid"],
        raw["fake_malformed"],
        0,
    )
    assert e["fake_answering_though_base_absent"] == raw["rescued"]
    by_quantity = {r["quantity"]: r for r in rows}
    assert by_quantity["pooled releases equal the clients' own (bit for bit)"]["reported"] is True
    assert by_quantity["valid releases missing from the pool"]["reported"] == 0


def test_a_lost_release_is_reported_as_a_mismatch(small_run):
    """The checks can fail: a server that lost one valid release does not pass."""
    mod = load_simulation("federation_faults")
    s = small_run["summary"]
    cfg = mod.make_config(300, "unused", dropout=0.1, fake_fraction=0.02, seed=SEED)
    exp = mod.expected_counts(cfg, 0.05, tuple(FAULT_KINDS))
    kept = exp["valid"][1:]
    pool = Pool.from_releases([release_clients(exp["population"], kept, lambda c: client_generator(SEED, c))])
    metrics = {
        **s["metrics"],
        "n_releases": len(kept),
        "population": {"fake_clients": {"n_fake": s["expected"]["fake"]}},
        "frequency_check": s["frequency_check"],
        "status": "done",
    }
    bad = {r["quantity"] for r in mod.check_run(cfg, metrics, pool, exp) if not r["ok"]}
    assert {"valid releases kept (n_releases)", "pooled releases", "valid releases missing from the pool"} <= bad


def test_the_outputs_name_their_command(small_run, tmp_path):
    mod = load_simulation("federation_faults")
    command = "python simulations/federation_faults.py --n-clients 300 --seed 17"
    text = mod.write(small_run, tmp_path, command)
    assert "| dropped out |" in text and "all counts equal: yes" in text
    for name in ("federation_faults.md", "federation_faults.csv", "federation_faults.json"):
        assert command in (tmp_path / name).read_text(), name


@pytest.mark.slow
def test_ten_thousand_nodes_with_faults():
    """The issue's run: 10⁴ one-client nodes (a few minutes on two cores)."""
    s = load_simulation("federation_faults").run(10_000)
    raw = raw_expectation(10_000, 0)
    assert s["summary"]["ok"], [r for r in s["rows"] if not r["ok"]]
    assert s["summary"]["metrics"]["dropped"] == raw["dropped"]
    assert s["summary"]["metrics"]["n_releases"] == len(raw["valid"])
