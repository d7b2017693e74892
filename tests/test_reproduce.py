"""``fedrr reproduce``: rerun a results directory from its manifest and compare results.csv."""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path

import pytest

from fedrr.errors import ValidationError
from fedrr.experiment import digest, load_scenario, sweep, write_reports
from fedrr.experiment._manifest import FINGERPRINT, blas, coretype_hint, mismatches
from fedrr.experiment._reproduce import compare, read_rows, report
from fedrr.experiment.cli import main

SMALL = """
[scenario]
name = "small"
seed = 11
repeats = 2
[population]
dataset = "digits_7_vs_9"
n_clients = 100
n_test_per_class = 20
[privacy]
mechanism = "rr"
feature_flip_grid = [0.1, 0.3]
label_flip = "same"
[learners]
names = ["naive", "majority"]
[run]
mode = "offline"
workers = 1
"""


@pytest.fixture(scope="module")
def committed(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("committed")
    cfg = tmp / "small.toml"
    cfg.write_text(SMALL)
    sweep(load_scenario(cfg), tmp / "res", log=lambda s: None, progress=False)
    write_reports(tmp / "res")
    cfg.write_text(SMALL.replace("seed = 11", "seed = 12"))  # the file moved on; the manifest kept the text
    return tmp / "res"


def test_a_rerun_reproduces_and_a_changed_value_is_named(committed, tmp_path, capsys):
    assert main(["reproduce", str(committed), "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "REPRODUCED" in out
    rows = read_rows(committed / "results.csv")
    assert f"sha256 committed {digest(rows)}" in out and f"sha256 rerun     {digest(rows)}" in out
    assert "same CPU, SIMD targets, BLAS and package versions as the manifest records" in out

    changed = tmp_path / "changed"
    changed.mkdir()
    (changed / "manifest.json").write_text((committed / "manifest.json").read_text())
    i = next(i for i, r in enumerate(rows) if r["grid_index"] == "0" and r["learner"] == "naive")
    rows[i]["accuracy"] = "0.5"
    with open(changed / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert main(["reproduce", str(changed), "--out", str(tmp_path / "b"), "--index", "0"]) == 1
    out = capsys.readouterr().out
    assert f"{rows[i]['cell']} naive accuracy: 0.5 -> " in out
    assert "DIFFERS: 1 value(s)" in out


def test_timing_columns_do_not_count_and_extra_columns_are_reported():
    old = [{"cell": "c", "learner": "l", "accuracy": "0.9", "seconds": "1.0", "gone": "x"}]
    new = [{"cell": "c", "learner": "l", "accuracy": "0.9", "seconds": "2.0", "added": "y"}]
    res = compare(old, new)
    assert not res["diffs"] and res["digest_old"] == res["digest_new"]
    assert res["columns_only_old"] == ["gone"] and res["columns_only_new"] == ["added"]
    res = compare(old, [{**new[0], "accuracy": "0.8"}, {"cell": "c", "learner": "m", "accuracy": "1"}])
    assert res["diffs"] == [("c", "l", "accuracy", "0.9", "0.8")] and res["only_new"] == [("c", "m")]


def test_a_different_cpu_or_version_or_an_unrecorded_entry_is_named(committed):
    man = json.loads((committed / "manifest.json").read_text())
    assert mismatches(man) == []
    assert set(FINGERPRINT) <= set(man["machine"]) and man["machine"]["cpu"] and man["machine"]["simd"]
    reordered = copy.deepcopy(man)
    reordered["machine"]["blas"] = reordered["machine"]["blas"][::-1] + [dict(reordered["machine"]["blas"][0])]
    with_openmp = copy.deepcopy(man)
    with_openmp["machine"]["blas"] = [*with_openmp["machine"]["blas"], {"internal_api": "openmp", "prefix": "libgomp"}]
    assert not mismatches(with_openmp)  # older manifests listed sklearn's OpenMP among them
    assert mismatches(reordered) and not mismatches(
        {**reordered, "machine": {**reordered["machine"], "blas": reordered["machine"]["blas"][:-1]}}
    )
    moved = copy.deepcopy(man)
    moved["machine"]["cpu"]["cpu family"] = "other"  # whatever this machine's is (a literal failed on family 25)
    moved["machine"]["cpu"]["microcode"] = "0x0"  # not arithmetic: not reported
    moved["machine"]["simd"] = ["NO_SUCH_TARGET"]  # no machine's (a literal X86_V3 was this machine's own)
    moved["versions"]["numpy"] = "1.0.0"
    del moved["machine"]["blas"]
    got = mismatches(moved)
    assert len(got) == 4, got
    assert got[0].startswith("numpy 1.0.0 -> ") and "'cpu family': 'other'" in got[1] and "microcode" not in got[1]
    assert got[2].startswith("simd ['NO_SUCH_TARGET'] -> ") and got[3] == "blas: not recorded by that manifest"
    res = {"diffs": [], "only_old": [], "only_new": [], "rows": 1, "out": "o", "digest_old": "a", "digest_new": "a"}
    text, same = report({**res, "columns_only_old": [], "columns_only_new": [], "machine": got})
    assert same and "this machine or its versions differ from the manifest's" in text and "  blas: not" in text


def test_other_openblas_kernels_get_the_coretype_that_restores_them():
    here = blas()
    kernels = {b.get("architecture") for b in here if b.get("internal_api") == "openblas"}
    if not kernels:  # pragma: no cover - a numpy without OpenBLAS: nothing to hint
        pytest.skip("numpy and scipy do not use OpenBLAS here")
    other = [{**b, "architecture": "Zen"} for b in here]
    assert coretype_hint({"machine": {"blas": other}}) == "OPENBLAS_CORETYPE=Zen"
    assert coretype_hint({"machine": {"blas": here}}) is None  # the same kernels: nothing to set
    assert coretype_hint({"machine": {}}) is None  # not recorded
    mixed = [{**b, "architecture": a} for b, a in zip(other * 2, ("Zen", "Haswell"))]
    assert coretype_hint({"machine": {"blas": mixed}}) is None  # no one value restores both
    res = {"diffs": [("c", "l", "mse", 1.0, 2.0)], "only_old": [], "only_new": [], "rows": 1, "out": "o"}
    res.update(digest_old="a", digest_new="b", columns_only_old=[], columns_only_new=[], machine=["blas ..."])
    text, same = report({**res, "hint": "OPENBLAS_CORETYPE=Zen"})
    assert not same and "run again with OPENBLAS_CORETYPE=Zen" in text
    assert "OPENBLAS_CORETYPE" not in report({**res, "diffs": [], "hint": "OPENBLAS_CORETYPE=Zen"})[0]


def test_a_directory_without_a_manifest_is_refused(tmp_path):
    with pytest.raises(ValidationError, match="manifest.json") as e:
        from fedrr.experiment import reproduce

        reproduce(tmp_path)
    assert e.value.field == "results_dir"
