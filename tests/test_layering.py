"""The package's layering, read from the import statements of every module (function-level imports
and ``if TYPE_CHECKING:`` blocks included): each stage of the data flow imports only earlier
stages, the core never imports Flower, and nothing outside fedrr.testing imports the test
instrumentation. A subprocess check confirms the core imports with flwr unavailable."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "fedrr"

#: the data flow, in order: a module may import its own stage and earlier ones only
STAGES = [
    (
        "base",
        [
            "fedrr.errors",
            "fedrr._validation",
            "fedrr._params",
            "fedrr.io",
            "fedrr._procs",
            "fedrr._names",
            "fedrr._user_code",
            "fedrr",
        ],
    ),
    # the config schema validates names against plain tuples (fedrr._names): the domain may read its defaults
    ("config schema", ["fedrr._config_schema", "fedrr._config_tables"]),
    # the planner shares the mechanisms' stage: fedrr.mechanisms re-exports its names (lazily) for compatibility
    ("inputs", ["fedrr.datasets", "fedrr.mechanisms", "fedrr.planning"]),
    ("population", ["fedrr.population", "fedrr.examples", "fedrr.fake"]),
    ("release", ["fedrr.release", "fedrr.gradient_release"]),
    ("pool", ["fedrr.pool", "fedrr.frequency_check"]),
    ("parallel", ["fedrr.parallel"]),
    ("estimators", ["fedrr.estimators"]),
    ("learners", ["fedrr.learners"]),
    ("run config", ["fedrr.run_config", "fedrr._config_rules"]),
    # domain objects from a run config: the domain below never reads a config
    ("assembly", ["fedrr.assembly"]),
    ("federation", ["fedrr.federation"]),
    ("experiment, audit", ["fedrr.experiment", "fedrr.audit"]),
    ("testing", ["fedrr.testing"]),
]
#: third-party packages only some modules may import (each with the modules that may)
ONLY = {
    "flwr": ("fedrr.federation",),
    # generic executors, and spread-EM's own runtime (its shards in Ray actors)
    "ray": ("fedrr.parallel", "fedrr.estimators.spread._runtime"),
}
ALSO_FLWR = {"fedrr.testing", "fedrr.experiment", "fedrr.audit"}  # top stages may use Flower directly


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _stage_of(module: str) -> int:
    best, idx = -1, None
    for i, (_, prefixes) in enumerate(STAGES):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, idx = len(p), i
    assert idx is not None, f"{module} belongs to no stage: add it to STAGES"
    return idx


def _imports(path: Path, module: str) -> list[tuple[str, int]]:
    """(imported module, line) for every import: module level, in a function, or typing only (an
    ``if TYPE_CHECKING:`` import ties the modules as much as any)."""
    tree = ast.parse(path.read_text(), str(path))
    pkg = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
                out += [(f"{target}.{a.name}" if not node.module else target, node.lineno) for a in node.names]
            else:
                out.append((node.module or "", node.lineno))
    return out


MODULES = sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_import_points_back_up_the_data_flow(path):
    module = _module_name(path)
    mine = _stage_of(module)
    bad = []
    for target, line in _imports(path, module):
        top = target.split(".")[0]
        if top == "fedrr":
            # a name imported from a package (``from . import x``) resolves to that package's stage
            t = target if _known(target) else target.rpartition(".")[0]
            theirs = _stage_of(t)
            if theirs > mine:
                bad.append(f"line {line}: {target} ({STAGES[theirs][0]}) from {STAGES[mine][0]}")
            if t.startswith("fedrr.testing") and not module.startswith("fedrr.testing"):
                bad.append(f"line {line}: production code imports test instrumentation {target}")
        elif top in ONLY:
            allowed = any(module == m or module.startswith(m + ".") for m in ONLY[top])
            if not (allowed or (top == "flwr" and any(module.startswith(m) for m in ALSO_FLWR))):
                bad.append(f"line {line}: {top} imported by {module} ({STAGES[mine][0]})")
    assert not bad, "\n".join(bad)


#: spread-EM's shard methods and its prior update: the generic executors must not know them
SPREAD_METHODS = (
    "set_prior",
    "update_prior",
    "update_priors",
    "estep",
    "init_samples",
    "n_samples_weight",
    "loss_grad",
    "hessian",
    "logit_moments",
    "release_counts",
    "fetch_priors",
    "prior_step",
)


@pytest.mark.parametrize("path", sorted((PKG / "parallel").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_parallel_names_no_spread_method(path):
    """fedrr.parallel holds generic executors only: no spread-EM shard method or prior update is
    named there (in code, strings or docs): spread's runtime lives in fedrr.estimators.spread."""
    text = path.read_text()
    found = sorted({m for m in SPREAD_METHODS if re.search(rf"\b{m}\b", text)})
    assert not found, f"{path.relative_to(ROOT)} names spread-EM's methods {found}"


def import_circles() -> list[set[str]]:
    """The strongly connected components of more than one module of fedrr's import graph (every
    import counted, ``_imports``; a name imported from a package counts as the package)."""
    mods = {_module_name(p): p for p in MODULES}

    def resolve(t: str) -> str:
        while t and t not in mods:
            t = t.rpartition(".")[0]
        return t

    graph = {
        m: {resolve(t) for t, _ in _imports(p, m) if t.split(".")[0] == "fedrr"} - {m, ""} for m, p in mods.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle():
    """No two modules of fedrr import each other, directly or through others, counting function-level
    and typing-only imports (issue 44: it once ran through 19 modules, the config among them): each
    module's place in the layering is then well defined."""
    circles = import_circles()
    assert not circles, f"import circles: {[sorted(c) for c in circles]}"


def test_the_circle_count_sees_a_circle(tmp_path, monkeypatch):
    """The count can fail: population importing the release module (a typing-only import) closes a circle."""
    src = PKG / "population.py"
    copy = tmp_path / "fedrr" / "population.py"
    copy.parent.mkdir()
    copy.write_text(src.read_text() + "\nif TYPE_CHECKING:\n    from .release import offline_release\n")
    real = _imports
    monkeypatch.setattr(sys.modules[__name__], "_imports", lambda p, m: real(copy if p == src else p, m), raising=True)
    assert any({"fedrr.population", "fedrr.release"} <= c for c in import_circles())


def test_the_names_leaf_lists_the_built_in_datasets():
    """The config schema validates dataset names against fedrr._names.DATASETS (it imports no domain
    module): the datasets' registry must hold exactly those, in that order."""
    from fedrr._names import DATASETS
    from fedrr.datasets import LOADERS

    assert tuple(LOADERS) == DATASETS


def _known(name: str) -> bool:
    path = ROOT / Path(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def test_the_core_imports_without_flower_or_ray():
    """Importing every core stage with flwr and ray made unimportable."""
    core = [
        "fedrr.mechanisms",
        "fedrr.planning",
        "fedrr.population",
        "fedrr.release",
        "fedrr.gradient_release",
        "fedrr.pool",
        "fedrr.fake",
        "fedrr.frequency_check",
        "fedrr.estimators",
        "fedrr.learners",
        "fedrr.run_config",
        "fedrr.datasets",
    ]
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('flwr', 'ray'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        f"import importlib\nfor m in {core!r}:\n    importlib.import_module(m)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('flwr', 'ray')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


#: fedrr's private base modules: any subpackage may import these modules (never their ``_names``)
BASE = {
    "fedrr._validation",
    "fedrr._params",
    "fedrr._procs",
    "fedrr._names",
    "fedrr._config_schema",
    "fedrr._config_rules",
    "fedrr._config_tables",
    "fedrr._resources",
    "fedrr._lazy",
    "fedrr._user_code",
}


def _unit(module: str) -> str:
    """The subpackage (or top-level module) a module of fedrr belongs to: ``fedrr.x`` of ``fedrr.x.y``."""
    return ".".join(module.split(".")[:2])


def _private_reach(path: Path, module: str) -> list[str]:
    """Imports by ``module`` of an underscore name or a private module ``fedrr.X._y`` of another
    subpackage (or top-level module) X of fedrr (``if TYPE_CHECKING:`` blocks included)."""
    tree = ast.parse(path.read_text(), str(path))
    pkg = module if path.name == "__init__.py" else module.rpartition(".")[0]
    mine = _unit(module)
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            pairs = [(target, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            pairs = [(a.name, None) for a in node.names]
        else:
            continue
        for target, name in pairs:
            if not (target == "fedrr" or target.startswith("fedrr.")):
                continue
            # ``from fedrr.x import _y`` names a private module or a private name of fedrr.x alike
            full = f"{target}.{name}" if name and name != "*" else target
            if _unit(full) == mine:
                continue
            parts = full.split(".")
            private = [i for i, p in enumerate(parts) if p.startswith("_") and not p.startswith("__")]
            if not private:
                continue
            if name and name.startswith("_") and not _known(full):
                bad.append(f"line {node.lineno}: the underscore name {name} from {target}")
            elif ".".join(parts[: private[0] + 1]) not in BASE or len(private) > 1:
                bad.append(f"line {node.lineno}: the private module {full}")
    return bad


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_private_import_across_subpackages(path):
    """A module of fedrr imports another subpackage's public names only (those its ``__init__``
    exports, or a public module's): no underscore name and no private module ``fedrr.X._y`` of another
    subpackage X. The private base modules (``BASE``) may be imported, their underscore names not."""
    bad = _private_reach(path, _module_name(path))
    assert not bad, "\n".join(bad)


def test_the_private_import_check_catches_both_kinds(tmp_path):
    probe = PKG / "pool.py"  # any module outside fedrr.mechanisms, read from a copy
    src = tmp_path / "pool.py"
    src.write_text(
        "from fedrr.mechanisms._discrete import RandomizedResponse\n"
        "from .mechanisms import _discrete\n"
        "from ._validation import _check\n"
        "from ._validation import check_int\n"
        "from .mechanisms import RandomizedResponse\n"
    )
    bad = _private_reach(src, _module_name(probe))
    assert [b.split(":")[0] for b in bad] == ["line 1", "line 2", "line 3"], bad


def test_the_names_leaf_lists_the_learner_registry():
    """The config rules and the scenario sections validate learner names against fedrr._names (they
    import no learner): the registry must hold exactly those, by task, with those oracles."""
    from fedrr._names import LEARNERS, ORACLE_LEARNERS, RELEASE_LEARNERS
    from fedrr.learners import names

    for task, listed in LEARNERS.items():
        assert names(task) == listed, task
        assert names(task, oracles=False) == tuple(n for n in listed if n not in ORACLE_LEARNERS), task
    assert names(oracles=False) == RELEASE_LEARNERS
