"""The docs cannot drift from the code: the config reference equals what the typed configs generate,
every ```python block of the README and the docs runs, and every repository file they name exists.

Snippet conventions (Markdown comments on the line before the fence):
``<!-- skip-test: reason -->`` — not run (e.g. a file included at build time);
``<!-- test: slow -->`` — run only with ``-m slow`` (it starts Ray or a Flower simulation).
A page's blocks run in order in one namespace, in a temporary working directory."""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

import pytest

from fedrr.experiment import reference
from fedrr.run_config import DEFAULTS, RunConfig

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
FENCE = re.compile(r"(?:<!--\s*(?P<marker>[^>]*?)\s*-->\s*\n)?```python\n(?P<code>.*?)```", re.S)
#: names that look like repository files but are placeholders in the prose
NOT_FILES: set[str] = set()
#: files the CHANGELOG names because they were moved or removed
GONE = {
    "tests/malicious_server.py",
    "simulations/spread_fallback_rules.py",  # issue 44: simulations/spread_cv_scoring.py --part rules
    "simulations/adult_public_prior.py",  # issue 44: simulations/adult_spread.py --part public-prior
    "simulations/gaussian_accounting.py",  # issue 44: a section of docs/concepts/epsilon.md
}


def _rel(p: Path) -> str:
    return p.relative_to(ROOT).as_posix()


def snippets(page: Path) -> list[tuple[str, str]]:
    """(marker, code) of every ```python block of a page."""
    return [(m.group("marker") or "", m.group("code")) for m in FENCE.finditer(page.read_text(encoding="utf-8"))]


def test_config_reference_is_up_to_date():
    committed = (DOCS / "reference" / "config.md").read_text(encoding="utf-8")
    assert committed == reference.markdown(), (
        "docs/reference/config.md differs from the typed configs: regenerate it with "
        "`python -m fedrr.experiment.reference docs/reference/config.md`"
    )


def test_pyprojects_app_config_is_generated_from_the_schema():
    """pyproject's [tool.flwr.app.config] is the schema's: every run-config key, its default (the app's
    two documented ones aside), a comment from its documentation; Flower's own parser reads it."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert reference.app_config_block(text) == reference.app_config(), (
        "pyproject.toml's [tool.flwr.app.config] differs from fedrr/_config_schema.py: regenerate it with "
        "`python -m fedrr.experiment.reference --pyproject pyproject.toml`"
    )
    assert reference.sync_app_config(text) == text  # regenerating leaves the rest of the file as it is
    from flwr.common.config import flatten_dict

    app = tomllib.loads(text)["tool"]["flwr"]["app"]["config"]
    assert flatten_dict(app) == {**DEFAULTS, **reference.APP_DEFAULTS}
    assert RunConfig.from_flwr(app).n_nodes == 2  # the app's defaults: a bare `flwr run .` on 2 SuperNodes


def test_a_changed_default_makes_the_app_config_stale():
    """The check can fail: a pyproject whose block differs from the schema's (a default changed by hand)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    edited = text.replace("\nspread-max-iter = 200 ", "\nspread-max-iter = 100 ")
    assert edited != text and reference.app_config_block(edited) != reference.app_config()
    assert reference.sync_app_config(edited) == text
    with pytest.raises(ValueError, match="no \\[tool.flwr.app.config\\] table"):
        reference.sync_app_config("[project]\nname = 'x'\n")


#: files whose comments or prose may carry registry lists (``<generated: NAME>`` regions)
LIST_FILES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md")), *sorted((ROOT / "configs").rglob("*.toml"))]


def test_generated_lists_are_up_to_date():
    """Every ``<generated: NAME>`` region holds what the registries give today."""
    stale = [
        _rel(p)
        for p in LIST_FILES
        if reference.sync_generated(p.read_text(encoding="utf-8"), _rel(p)) != p.read_text(encoding="utf-8")
    ]
    assert not stale, (
        f"registry lists out of date in {stale}: regenerate with "
        f"`python -m fedrr.experiment.reference --lists {' '.join(stale)}`"
    )


def test_generated_lists_are_where_users_read_them():
    """The quickstart config and the first-sweep tutorial list every dataset, learner and
    mechanism family from the registries (they once left out the demo's own ldp-nb, ldp-sgd,
    majority and adult_binned)."""
    from fedrr.datasets import LOADERS
    from fedrr.learners import TASKS, names
    from fedrr.population import MECHANISM_FAMILIES

    for page in (ROOT / "configs" / "quickstart.toml", DOCS / "tutorial" / "first-sweep.md"):
        text = page.read_text(encoding="utf-8")
        for region in ("datasets", "learners", "mechanisms"):
            assert f"<generated: {region}>" in text, f"{_rel(page)} has no generated {region} list"
        for name in ("ldp-nb", "ldp-sgd", "majority", "adult_binned", "paired"):
            assert re.search(rf"(?<![\w-]){name}(?![\w-])", text), f"{_rel(page)} does not name {name}"
    lists = reference.registry_lists()
    assert all(f" {n}" in lists["datasets"] for n in LOADERS)
    assert all(f" {n}" in lists["mechanisms"] for n in MECHANISM_FAMILIES)
    assert all(f" {n}" in lists["learners"] for n in names(TASKS[0]))
    assert all(f" {n}" in lists["learners-regression"] for n in names(TASKS[1]))


def test_unknown_generated_list_is_refused():
    with pytest.raises(ValueError, match="unknown generated list 'learner'"):
        reference.sync_generated("# <generated: learner>\n# </generated>\n")


def test_configs_write_no_registry_list_by_hand():
    """Outside generated regions a config's comment names at most two of a registry's entries in a
    row (``a | b | c`` is a list, and lists are generated)."""
    from fedrr.datasets import LOADERS
    from fedrr.learners import TASKS, names
    from fedrr.population import MECHANISM_FAMILIES

    registries = [set(LOADERS), set(MECHANISM_FAMILIES), {n for t in TASKS for n in names(t)}]
    found = []
    for path in sorted((ROOT / "configs").rglob("*.toml")):
        text = re.sub(r"<generated: [\w-]+>.*?</generated>", "", path.read_text(encoding="utf-8"), flags=re.S)
        for line in text.splitlines():
            comment = line.partition("#")[2]
            items = [w.strip(" \"'") for w in comment.split("|")]
            for reg in registries:
                if sum(w.split(" ")[-1] in reg or w.split(" ")[0] in reg for w in items) >= 3:
                    found.append(f"{_rel(path)}: {line.strip()}")
    assert not found, "hand-written registry lists (use a <generated: NAME> region):\n" + "\n".join(found)


def test_reference_lists_every_key():
    from dataclasses import fields

    from fedrr.experiment._sections import SECTIONS
    from fedrr.run_config import RunConfig

    text = reference.markdown()
    for section, cls in SECTIONS.items():
        assert f"### `[{section}]`" in text
        for f in fields(cls):
            assert f"| `{f.name}` |" in text, f"[{section}] {f.name}"
    for f in fields(RunConfig):
        if f.metadata.get("flwr"):
            assert f"| `{f.metadata['flwr']}` | `{f.name}` |" in text


def _blocks(page: Path, slow: bool) -> list[tuple[str, str]]:
    blocks = [(m, c) for m, c in snippets(page) if not m.startswith("skip-test")]
    return blocks if slow else [(m, c) for m, c in blocks if m != "test: slow"]


def _run_page(page: Path, tmp_path: Path, monkeypatch, slow: bool) -> int:
    blocks = _blocks(page, slow)
    monkeypatch.chdir(tmp_path)  # snippets write results/... relative to the working directory
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace: dict = {"__name__": "__docs__"}
    for i, (_, code) in enumerate(blocks):
        try:
            exec(compile(code, f"{_rel(page)}[python block {i + 1}]", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"{_rel(page)}: python block {i + 1} failed: {type(exc).__name__}: {exc}") from exc
    return len(blocks)


@pytest.mark.parametrize("page", [p for p in PAGES if _blocks(p, slow=False)], ids=_rel)
def test_python_snippets_run(page, tmp_path, monkeypatch):
    _run_page(page, tmp_path, monkeypatch, slow=False)


SLOW_PAGES = [p for p in PAGES if any(m == "test: slow" for m, _ in snippets(p))]


@pytest.mark.slow
@pytest.mark.parametrize("page", SLOW_PAGES, ids=_rel)
def test_python_snippets_run_with_slow_ones(page, tmp_path, monkeypatch):
    _run_page(page, tmp_path, monkeypatch, slow=True)


def test_snippet_markers_are_known():
    for page in PAGES:
        for marker, _ in snippets(page):
            assert marker == "" or marker == "test: slow" or marker.startswith("skip-test:"), (
                f"{_rel(page)}: unknown snippet marker <!-- {marker} -->"
            )


_PATH = re.compile(
    r"(?<![\w./-])((?:configs|simulations|fedrr|tests|results|docs)/[\w./-]*\.(?:toml|py|md|png|csv|json|txt))"
)
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_named_repository_files_exist():
    missing = []
    for page in [*PAGES, ROOT / "CHANGELOG.md", ROOT / "SECURITY.md"]:
        text = page.read_text(encoding="utf-8")
        for path in set(_PATH.findall(text)) - NOT_FILES - (GONE if page.name == "CHANGELOG.md" else set()):
            if not (ROOT / path).exists():
                missing.append(f"{_rel(page)}: {path}")
    assert not missing, "the docs name files that do not exist:\n" + "\n".join(sorted(missing))


def test_readme_links_and_images_exist():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = [t for t in _LINK.findall(text) if "://" not in t]
    assert targets
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, f"README.md links to missing files: {missing}"


_IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s#]+)[^)]*\)")


def test_image_links_resolve_from_their_own_page():
    """Every image of README.md and docs/ is a file at its path from the page's own directory, as
    GitHub reads it (the mkdocs hook docs/hooks/results.py maps such links into the site)."""
    images, missing = 0, []
    for page in PAGES:
        for target in _IMAGE.findall(page.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            images += 1
            if not (page.parent / target).is_file():
                missing.append(f"{_rel(page)}: {target}")
    assert images >= 10, f"found only {images} image links: is the pattern still right?"
    assert not missing, "image links that do not resolve from their page:\n" + "\n".join(missing)


def test_docs_hook_maps_repository_files_into_the_site():
    import importlib.util

    spec = importlib.util.spec_from_file_location("_results_hook", DOCS / "hooks" / "results.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    png = "results/adult_planned/accuracy_vs_epsilon.png"
    assert hook.outside_docs("../" + png, "results.md", DOCS) == png
    assert hook.outside_docs("../../" + png, "concepts/fake-clients.md", DOCS) == png
    assert hook.outside_docs("concepts/ledger.md", "index.md", DOCS) is None  # inside docs/: mkdocs's own
    assert hook.outside_docs("https://example.org/a.png", "index.md", DOCS) is None


@pytest.mark.integration
def test_strict_site_build_carries_every_image(tmp_path):
    """``mkdocs build --strict`` passes, and every <img> of the built site names a file in it."""
    import subprocess
    import sys

    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    res = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    seen, missing = 0, []
    for html in tmp_path.rglob("*.html"):
        for src in re.findall(r'<img[^>]*\ssrc="([^"]+)"', html.read_text(encoding="utf-8")):
            if "://" in src or src.startswith("data:"):
                continue
            seen += 1
            if not (html.parent / src).is_file():
                missing.append(f"{html.relative_to(tmp_path)}: {src}")
    assert seen >= 10
    assert not missing, "\n".join(missing)


def test_readme_stays_short():
    n = len((ROOT / "README.md").read_text(encoding="utf-8").splitlines())
    assert n <= 140, f"README.md has {n} lines; the details belong in docs/"


def test_every_docs_page_is_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert {p for p in pages if f" {p}" not in nav} == set()


def test_make_test_runs_lint_docs_and_pytest_and_ci_runs_make_test():
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    rule = re.search(r"^test:(?P<deps>[^\n]*)\n(?P<body>(?:\t[^\n]*\n)+)", make, re.M)
    assert rule, "no test target in the Makefile"
    assert "lint" in rule.group("deps") and "docs" in rule.group("deps")
    assert "pytest" in rule.group("body")
    ci = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert "make test" in ci
    assert os.access(ROOT / ".ci" / "run", os.X_OK)


#: packages whose ``__all__`` is fedrr's public surface (every public package whose ``__init__``
#: sets one): every name must be in the API reference
PUBLIC_PACKAGES = tuple(
    ".".join(init.relative_to(ROOT).parent.parts)
    for init in sorted((ROOT / "fedrr").rglob("__init__.py"))
    if not any(part.startswith("_") for part in init.relative_to(ROOT).parent.parts)
    and re.search(r"^__all__\b", init.read_text(encoding="utf-8"), re.M)
)


def test_public_packages_are_found():
    assert {"fedrr", "fedrr.mechanisms", "fedrr.federation", "fedrr.estimators.spread"} <= set(PUBLIC_PACKAGES)


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_api_reference_documents_every_public_name(package):
    """A name in a public package's ``__all__`` is rendered by the API reference: ``::: pkg.Name``,
    the whole package (``::: pkg``), or the module that defines it (``::: module`` or
    ``::: module.Name``); a plain value (``__version__``) is named in the text."""
    import importlib

    api = "\n".join(p.read_text(encoding="utf-8") for p in sorted((DOCS / "reference" / "api").glob("*.md")))
    targets = set(re.findall(r"^::: ([\w.]+)", api, re.M))
    mod = importlib.import_module(package)
    missing = []
    for name in mod.__all__:
        home = getattr(getattr(mod, name), "__module__", None)
        keys = {package, f"{package}.{name}"} | ({home, f"{home}.{name}"} if isinstance(home, str) else set())
        if not (keys & targets or (name.startswith("__") and f"`{package}.{name}`" in api)):
            missing.append(name)
    assert not missing, f"{package}: not in docs/reference/api: {missing}"


def test_documented_flwr_offline_switch_is_flwrs(monkeypatch):
    """The variable the Flower tutorial names is the one installed flwr reads to skip its
    runtime ``uv sync``, and fedrr's wrapper sets it."""
    from flwr.common.constant import FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION as var
    from flwr.superlink.cli.flower_superlink import _runtime_dependency_install_default

    from fedrr.federation.flwr_cli import QUIET_ENV

    page = (DOCS / "tutorial" / "flower-simulation.md").read_text(encoding="utf-8")
    assert f"{var}=1 flwr run ." in page and "runtime-envs" in page
    monkeypatch.delenv(var, raising=False)
    assert _runtime_dependency_install_default() is True  # a bare `flwr run .` installs
    monkeypatch.setenv(var, "1")
    assert _runtime_dependency_install_default() is False
    assert QUIET_ENV.get(var) == "1"
