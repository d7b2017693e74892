"""Shared test fixtures."""

import numpy as np
import pytest

from fedrr.mechanisms import RandomizedResponse, RecordMechanism


@pytest.fixture
def small_rr_release():
    """3,000 synthetic 4-state records (5 features) released with RR flip 0.3 and label flip 0.2:
    (X_tilde, y_tilde, mechanism), for executor-equivalence tests."""
    rng = np.random.default_rng(0)
    n, d, k = 3000, 5, 4
    X = rng.integers(0, k, size=(n, d))
    y = (rng.random(n) < 1 / (1 + np.exp(-(X / 3) @ np.array([2.0, -1.0, 1.0, 0.5, -2.0])))).astype(int)
    rm = RecordMechanism(RandomizedResponse(k, 0.3), RandomizedResponse(2, 0.2), n_features=d)
    Xt, yt = rm.release(X, y, rng=rng)
    return Xt, yt, rm


@pytest.fixture
def app_copy(tmp_path):
    """A copy of the Flower app (pyproject.toml + the fedrr package) in tmp_path/app, so that
    `flwr run` can never rewrite the repository's own pyproject.toml."""
    import shutil
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    dst = tmp_path / "app"
    dst.mkdir()
    shutil.copy2(repo / "pyproject.toml", dst / "pyproject.toml")
    shutil.copytree(repo / "fedrr", dst / "fedrr", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dst


def load_simulation(name: str):
    """Import ``simulations/<name>.py`` (a script, not a package) as a module, registered in
    ``sys.modules`` so that its dataclasses can look their module up."""
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "simulations" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, mod)
    spec.loader.exec_module(mod)
    return sys.modules[spec.name]


#: test files that run Flower (simulations, the flwr CLI, deployments), a Ray cluster or actors, or whole
#: sweeps and scripts: the integration set (`make test-integration`), kept out of `make test`
_INTEGRATION_FILES = {
    "test_federation.py": "flower",
    "test_federation_deploy.py": "flower",
    "test_federation_deploy_crash.py": "flower",
    "test_federation_faults.py": "flower",
    "test_flwr_run.py": "flower",
    "test_malicious_server.py": "flower",
    "test_ray_cluster.py": "ray",
    "test_ray_executor.py": "ray",
    "test_ray_pool.py": "ray",
    "test_simulation.py": "scripts",
    "test_simulations_smoke.py": "scripts",
}
_INTEGRATION_TESTS = {"test_flower_run_equals_the_offline_simulator", "test_attack_through_a_flower_federation"}


def pytest_collection_modifyitems(config, items):
    """Mark the integration set: whole files above, single Flower tests elsewhere, and every test
    marked `flower` or `ray` by hand."""
    for item in items:
        kind = _INTEGRATION_FILES.get(item.path.name)
        if kind in ("flower", "ray"):
            item.add_marker(getattr(pytest.mark, kind))
        if item.originalname in _INTEGRATION_TESTS:
            item.add_marker(pytest.mark.flower)
        if kind or item.get_closest_marker("flower") or item.get_closest_marker("ray"):
            item.add_marker(pytest.mark.integration)
