"""The order a sweep starts its offline cells in on a pool (``longest_first``): the likely longest
first, which only the wall time depends on."""

from fedrr.experiment import parse_scenario
from fedrr.experiment._sweep import longest_first


def _spec(privacy: dict, n_clients=600, repeats=1):
    return parse_scenario(
        {
            "scenario": {"repeats": repeats},
            "population": {"dataset": "adult_binned", "n_clients": n_clients},
            "privacy": privacy,
            "learners": {"names": ["ldp-nb", "majority"]},
        }
    )


def test_more_clients_then_larger_epsilon_start_first():
    spec = _spec({"mechanism": "paired", "epsilon_grid": [0.5, 1.0, 4.0]}, n_clients=[300, 600], repeats=2)
    order = [(c.n_clients, c.grid_value, c.r) for c in longest_first(spec.cells())]
    assert order == [
        (600, 4.0, 0), (600, 4.0, 1), (600, 1.0, 0), (600, 1.0, 1), (600, 0.5, 0), (600, 0.5, 1),
        (300, 4.0, 0), (300, 4.0, 1), (300, 1.0, 0), (300, 1.0, 1), (300, 0.5, 0), (300, 0.5, 1),
    ]  # fmt: skip
    assert sorted(c.key for c in longest_first(spec.cells())) == sorted(c.key for c in spec.cells())


def test_a_flip_grid_starts_at_the_smallest_flip():
    spec = _spec({"mechanism": "rr", "feature_flip_grid": [0.2, 0.3, 0.4], "label_flip": "same"})
    assert [c.grid_value for c in longest_first(spec.cells())] == [0.2, 0.3, 0.4]


def test_a_sweep_hands_its_pool_the_cells_longest_first(tmp_path, monkeypatch):
    import fedrr.experiment._sweep as sweep_module

    seen = []
    monkeypatch.setattr(sweep_module, "_run_in_processes", lambda tasks, n, done: seen.extend(tasks))
    spec = _spec({"mechanism": "paired", "epsilon_grid": [0.5, 1.0, 4.0]})
    sweep_module.sweep(spec, tmp_path, workers=2, parallel="processes", progress=False, log=lambda _: None)
    assert seen == [c.key for c in longest_first(spec.cells())] == ["g002-n00-r000", "g001-n00-r000", "g000-n00-r000"]
