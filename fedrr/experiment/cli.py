"""The ``fedrr`` command: privacy budget vs accuracy sweeps from TOML scenario configs."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from .._validation import check_int
from ..errors import FedrrError, ValidationError
from ..planning import DEFAULT_TARGET

_QUIET = {
    "FLWR_TELEMETRY_ENABLED": "0",
    "FLWR_DISABLE_UPDATE_CHECK": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0",
    "MPLBACKEND": "Agg",
}

DESCRIPTION = """\
How much accuracy do you keep at a privacy budget ε per record, with N clients, for each learner?

A scenario is a TOML file (see configs/): the population (dataset, number of clients, dropout),
the mechanism and its ε grid, the learners, repeats, and how to run it (a real Flower
simulation, Flower nodes hosting cohorts of clients, or offline without Flower).
Every result is plotted against one axis: ε of releasing a whole record (all features and the
label), composed by the mechanisms' own accounting."""

EPILOG = """\
examples:
  fedrr sweep configs/quickstart.toml --out results/demo/quickstart   # the whole grid, resumable
  fedrr show results/demo/quickstart                                  # markdown table of the results
  fedrr plot results/demo/quickstart                                  # accuracy_vs_epsilon.png / .svg
  fedrr run configs/quickstart.toml --epsilon 3000 --out results/demo/quickstart   # one grid point
  fedrr check configs/quickstart.toml                            # validate a config, run nothing
  fedrr plan configs/adult_planned.toml --epsilon 1              # expected error, people needed
  fedrr plan --states 5,5,5,5,5,5 --classes 2 --epsilon 1 --n 20000   # the same for a schema
  fedrr reproduce results/quickstart                             # rerun a result, compare it
  fedrr credentials certs --nodes 5                              # TLS + node keys for a test deployment

Rerunning `fedrr sweep` with the same config and --out skips every finished cell, so an
interrupted sweep resumes where it stopped. Config errors print one line naming the key and
exit with status 2.

environment:
  FEDRR_SMOKE=1   a smoke run: sweep, run and reproduce compute only the first repeat of one
                  grid point (sweep and reproduce: the first; run: its own), the same cells and
                  seeds as the whole sweep's; the tests run the docs' commands this way"""


def _default_out(cfg) -> Path:
    return Path(cfg.scenario.out or f"results/{cfg.name}")


def _tracked(path: Path) -> bool:
    """Whether git tracks any file under ``path`` (False outside a git work tree or without git)."""
    import subprocess

    try:
        res = subprocess.run(
            ["git", "ls-files", "--", str(path)], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return res.returncode == 0 and bool(res.stdout.strip())


#: the environment variable of a smoke run (see EPILOG)
SMOKE_ENV = "FEDRR_SMOKE"


def smoke() -> bool:
    """Whether ``FEDRR_SMOKE`` asks for a smoke run (set and neither empty nor "0")."""
    return os.environ.get(SMOKE_ENV, "") not in ("", "0")


def _smoke_note(what: str) -> None:
    print(f"[fedrr] {SMOKE_ENV}=1: a smoke run: {what}", file=sys.stderr)


def _grid_index(cfg, args) -> list[int] | None:
    if args.index is not None:
        if not 0 <= args.index < max(len(cfg.grid), 1):
            raise ValidationError("--index", f"must be in [0, {max(len(cfg.grid), 1) - 1}], got {args.index}")
        return [args.index]
    if args.epsilon is None:
        return [0]
    if not cfg.grid_axis:
        raise ValidationError("--epsilon", "this scenario's population sets the budgets (no grid); leave --epsilon out")
    for g, v in enumerate(cfg.grid):
        if abs(v - args.epsilon) <= 1e-9 * max(abs(v), 1.0):
            return [g]
    raise ValidationError(
        "--epsilon",
        f"{args.epsilon:g} is not a value of privacy.{cfg.grid_axis} ({', '.join(f'{v:g}' for v in cfg.grid)})",
    )


def _check_fewer_repeats(out: Path, n: int) -> None:
    """--repeats N into a directory whose sweep ran more repeats would rewrite its manifest and
    reports with N only (its cells stay): refused, naming both ways out."""
    import json

    try:
        ran = json.loads((out / "manifest.json").read_text())["config"]["scenario"]["repeats"]
    except (OSError, ValueError, KeyError, TypeError):
        return
    if isinstance(ran, int) and ran > n:
        raise ValidationError(
            "--repeats",
            f"{out} holds a sweep of {ran} repeats (its manifest.json); rerunning it with {n} would drop the "
            f"others from its reports: leave out --repeats to resume it, or pass another --out",
        )


def _cmd_sweep(args, single: bool) -> int:
    from ._outputs import write_reports
    from ._spec import first_repeats, load_scenario
    from ._sweep import sweep

    if args.workers is not None:  # cells at once; run.workers = 0 (one per CPU) is the way to say "all"
        check_int("--workers", args.workers, minimum=1)
    cfg = load_scenario(args.config)
    if smoke():
        args.repeats = 1
    if args.repeats is not None:
        cfg = first_repeats(cfg, args.repeats)
    out = Path(args.out) if args.out else _default_out(cfg)
    if args.repeats is not None:
        _check_fewer_repeats(out, args.repeats)
    if not args.out and _tracked(out):
        raise ValidationError(
            "--out",
            f"the default results directory {out} holds committed results (files tracked by git): pass --out DIR "
            f"for a new run (e.g. --out results/mine/{cfg.name}), or --out {out} to rerun into it on purpose",
        )
    grid = _grid_index(cfg, args) if single else None
    if smoke():
        grid = grid or [0]
        _smoke_note(f"only repeat 0 of grid point {grid[0]}, {len(cfg.n_grid)} cell(s) of {len(cfg.cells())}")
    progress = False if args.no_progress else None
    t0 = time.perf_counter()
    res = sweep(
        cfg,
        out,
        grid_indices=grid,
        workers=args.workers,
        parallel=args.parallel,
        progress=progress,
        argv=sys.argv if args.argv is None else args.argv,
    )
    rep = write_reports(out)
    print(rep["markdown"])
    print(
        f"[fedrr] {len(res.computed)} cell(s) computed, {len(res.skipped)} skipped (already finished), "
        f"{len(res.failed)} failed in {time.perf_counter() - t0:.1f} s"
    )
    print(
        f"[fedrr] wrote {rep['csv']}, {rep['summary']}, "
        + ", ".join(str(p) for p in rep["plots"])
        + f", {out / 'manifest.json'}"
    )
    if res.failed:
        for k, e in res.failed.items():
            print(f"fedrr: cell {k} failed: {e}", file=sys.stderr)
        print("fedrr: rerun the same command to retry the failed cells", file=sys.stderr)
    if msg := res.learner_failures():  # the cells are kept: their other learners' results stand
        print(f"fedrr: {msg}", file=sys.stderr)
    return 1 if res.failed or msg else 0


def _cmd_plot(args) -> int:
    from ._plots import plot

    for p in plot(args.results_dir):
        print(p)
    return 0


def _cmd_show(args) -> int:
    from ._summary import summary_markdown

    print(summary_markdown(args.results_dir), end="")
    return 0


def _cmd_check(args) -> int:
    from ._spec import load_scenario
    from ._sweep import preflight

    cfg = load_scenario(args.config)
    preflight(cfg)
    for note in cfg.notes:
        print(note)
    print(
        f"{args.config}: OK — scenario {cfg.name!r}, mode {cfg.run.mode}, "
        f"{len(cfg.cells())} cells ({max(len(cfg.grid), 1)} grid points × {len(cfg.n_grid)} N × "
        f"{cfg.scenario.repeats} repeats), learners {', '.join(cfg.learners.names)}"
    )
    return 0


def _cmd_plan(args) -> int:
    from ._plan import parse_states, plan, scenario_plans, summary

    if args.top < 1:
        raise ValidationError("--top", f"must be an integer >= 1, got {args.top}")
    if not args.target > 0:
        raise ValidationError(
            "--target", f"must be > 0 (an RMS error relative to a cell, e.g. 0.25), got {args.target}"
        )
    if args.config is not None:
        if args.states is not None or args.classes is not None:
            raise ValidationError("--states", "give a CONFIG or --states/--classes, not both")
        header, plans = scenario_plans(args.config, args.epsilon, args.n, args.target, args.dependence)
        print(header)
    else:
        if args.states is None:
            raise ValidationError(
                "CONFIG", "give a scenario file, or a schema: --states K1,K2,... --classes C --epsilon E --n N"
            )
        for opt, v in (("--classes", args.classes), ("--epsilon", args.epsilon)):
            if v is None:
                raise ValidationError(opt, "is required without a CONFIG (see fedrr plan --help)")
        if args.n is None:
            raise ValidationError("--n", "is required without a CONFIG: the number of people who release")
        ks = parse_states(args.states)
        plans = [(plan(ks, args.classes, args.epsilon, args.n, args.target, args.dependence), None)]
    for i, (p, own) in enumerate(plans):
        if i or args.config is not None:
            print()
        if own:
            print(own)
        print(p.describe(top=args.top, oracles=i == len(plans) - 1))
    if len(plans) > 1:
        print()
        print(summary([p for p, _ in plans]))
    return 0


def _cmd_reproduce(args) -> int:
    from ._reproduce import report, reproduce

    grid, repeats = ([args.index] if args.index is not None else None), None
    if smoke():
        grid, repeats = grid or [0], 1
        _smoke_note(f"only repeat 0 of grid point {grid[0]} is rerun and compared")
    text, same = report(reproduce(args.results_dir, args.out, grid, repeats=repeats))
    print(text)
    return 0 if same else 1


def _cmd_credentials(args) -> int:
    from ..federation import DEFAULT_HOSTS, create_credentials

    c = create_credentials(args.dir, args.nodes, hosts=args.host or DEFAULT_HOSTS, force=args.force)
    print(f"[fedrr] wrote a CA, a SuperLink certificate and {len(c.node_keys)} SuperNode key pair(s) to {args.dir}")
    print(
        f"  flower-superlink --ssl-ca-certfile {c.ca_cert} --ssl-certfile {c.server_cert} "
        f"--ssl-keyfile {c.server_key} --enable-supernode-auth ..."
    )
    print(f"  flwr supernode register {c.node_public_keys[0]} CONNECTION   # once per node-<i>.pub")
    print(f"  flower-supernode --root-certificates {c.ca_cert} --auth-supernode-private-key {c.node_keys[0]} ...")
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="fedrr", description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    def common(p):
        p.add_argument("config", metavar="CONFIG", help="scenario TOML file, e.g. configs/quickstart.toml")
        p.add_argument(
            "--out", metavar="DIR", help="results directory (default: scenario.out, else results/<scenario name>)"
        )
        p.add_argument(
            "--workers", type=int, metavar="N", help="offline mode: cells in parallel (default: run.workers)"
        )
        p.add_argument(
            "--parallel",
            choices=("ray", "processes"),
            help="offline mode: run cells as Ray tasks or in a "
            "process pool (default: run.parallel, 'ray'); the results are the same",
        )
        p.add_argument(
            "--repeats",
            type=int,
            metavar="N",
            help="run only the first N of the scenario's repeats (the same cells and seeds as the whole "
            "sweep's first N): a quicker look (FEDRR_SMOKE=1 in the environment: 1, and one grid point; "
            "see fedrr --help)",
        )
        p.add_argument("--no-progress", action="store_true", help="no progress bar")
        p.set_defaults(argv=None)

    def command(name, func, hlp, example, description=None):
        """The subcommand ``name`` run by ``func``, its help ending in the line ``example: fedrr NAME EXAMPLE``."""
        p = sub.add_parser(name, help=hlp, description=description, epilog=f"example: fedrr {name} {example}")
        p.set_defaults(func=func)
        return p

    p = command(
        "sweep",
        lambda a: _cmd_sweep(a, single=False),
        "run every cell of the grid (resumes: finished cells are skipped)",
        "configs/quickstart.toml --out results/demo/quickstart",
        "Run every (grid point, N, repeat) cell of CONFIG and write results.csv, "
        "manifest.json, summary.md and accuracy_vs_epsilon.png/.svg to DIR. Each cell is saved to "
        "DIR/cells/ as it finishes; rerunning skips the finished ones.",
    )
    common(p)
    p = command(
        "run",
        lambda a: _cmd_sweep(a, single=True),
        "run one grid point (default: the first) with all its N and repeats (or the first --repeats N)",
        "configs/quickstart.toml --epsilon 3000",
        "Run the cells of one grid point of CONFIG (into the same DIR a sweep uses, so a later sweep reuses them).",
    )
    common(p)
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--epsilon",
        type=float,
        metavar="VALUE",
        help="a value of the config's grid (epsilon_grid: ε per record; "
        "feature_flip_grid: a flip probability; feature_epsilon_grid: ε per feature)",
    )
    g.add_argument("--index", type=int, metavar="I", help="the grid point by position (0 = first)")
    # the commands of one positional argument (a results directory or a config), each with an example
    for name, func, arg, hlp in (
        ("plot", _cmd_plot, "results_dir", "(re)draw the plots of a results directory"),
        ("show", _cmd_show, "results_dir", "print the markdown summary table of a results directory"),
        ("check", _cmd_check, "config", "validate a config (and its dataset) without running anything"),
    ):
        # plot writes into its directory: its example is not the committed results/quickstart
        example = {"config": "configs/quickstart.toml", "results_dir": "results/quickstart"}[arg]
        example = "results/demo/quickstart" if name == "plot" else example
        command(name, func, hlp, example).add_argument(arg, metavar=arg.upper())
    p = command(
        "plan",
        _cmd_plan,
        "predict each release design's error at ε and N, and the people or ε a target error needs",
        "configs/adult_planned.toml --epsilon 1",
        "Score the release designs (paired / split, m sampled attributes, k-RR / OUE / OLH oracles) for the "
        "population of CONFIG (its schema, its ε grid and n_clients) or for a schema given with --states and "
        "--classes, and say what to expect of the chosen one: its predicted error per pair-table cell "
        "P(x_j=s, y=c) relative to the cell's size, a warning when that is as large as the cells, and how "
        "many people (at this ε), or what ε (at this N), brings it under --target. "
        "See docs/concepts/release-planner.md.",
    )
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = (
        "examples:\n"
        "  fedrr plan configs/adult_planned.toml                       # every ε of the grid at its n_clients\n"
        "  fedrr plan configs/adult_planned.toml --epsilon 1 --n 1000000 --top 3\n"
        "  fedrr plan configs/adult_planned.toml --epsilon 4 --n 300000 --dependence prefer\n"
        "  fedrr plan --states 5,5,5,5,5,5 --classes 2 --epsilon 1 --n 20000 --target 0.1"
    )
    p.add_argument("config", nargs="?", metavar="CONFIG", help="scenario TOML file (or give --states and --classes)")
    p.add_argument("--states", metavar="K1,K2,...", help="without CONFIG: the number of states of each attribute")
    p.add_argument("--classes", type=int, metavar="C", help="without CONFIG: the number of label classes")
    p.add_argument(
        "--epsilon", type=float, metavar="E", help="ε of one person's whole release (default: the scenario's grid)"
    )
    p.add_argument("--n", type=int, metavar="N", help="the number of people (default: the scenario's n_clients)")
    p.add_argument(
        "--target",
        type=float,
        default=DEFAULT_TARGET,
        metavar="T",
        help=f"the RMS error per cell, relative to the cell, to reach (default {DEFAULT_TARGET}: a cell's log "
        "within ±0.25, so cells a factor 2 apart are told apart)",
    )
    p.add_argument("--top", type=int, default=5, metavar="K", help="candidates listed per plan (default 5)")
    p.add_argument(
        "--dependence",
        default="prefer",
        metavar="{report,prefer}",
        help="prefer (default): rank first the designs that identify how the attributes co-occur (co-occurrence "
        "error within the planner's line), the triple first among them, so that the choice depends on N; "
        "report: rank by the pair tables' variance and say whether the choice identifies it",
    )
    p = command(
        "reproduce",
        _cmd_reproduce,
        "rerun a results directory from its manifest and compare results.csv (exit 1 if it differs)",
        "results/quickstart",
        "Rerun the sweep recorded in RESULTS_DIR/manifest.json (its config text and seed) into "
        "a scratch directory and compare results.csv with the committed one, every column but the timing "
        "ones; print both files' SHA-256 and every value that differs. See docs/reproducibility.md.",
    )
    p.add_argument("results_dir", metavar="RESULTS_DIR")
    p.add_argument("--out", metavar="DIR", help="where to rerun (default: a new temporary directory)")
    p.add_argument("--index", type=int, metavar="I", help="rerun only the cells of grid point I")
    p = command(
        "credentials",
        _cmd_credentials,
        "create TLS certificates and SuperNode keys for a test deployment",
        "certs --nodes 5 --host 127.0.0.1 --host localhost",
        "Write a local CA (ca.crt, ca.key), a SuperLink certificate signed by it (server.crt, "
        "server.key; every --host as a subject alternative name) and one ECDSA P-384 key pair per "
        "SuperNode in OpenSSH format (node-<i>.key, node-<i>.pub), as Flower 1.41's TLS and SuperNode "
        "authentication read them. Private keys are written 0600. For testing: a real deployment uses "
        "its own PKI. See docs/tutorial/deployment.md.",
    )
    p.add_argument("dir", metavar="DIR", help="directory to write to (created if needed)")
    p.add_argument("--nodes", type=int, required=True, metavar="N", help="number of SuperNode key pairs (>= 1)")
    p.add_argument(
        "--host",
        action="append",
        metavar="HOST",
        help="IP address or DNS name the SuperLink is reached at (repeatable; default: 127.0.0.1 and localhost)",
    )
    p.add_argument("--force", action="store_true", help="overwrite existing files in DIR")
    return ap


def main(argv: list[str] | None = None) -> int:
    for k, v in _QUIET.items():
        os.environ.setdefault(k, v)
    from .._user_code import mark_start_dir

    mark_start_dir()  # a population module here imports the same way in every process the run starts
    args = build_parser().parse_args(argv)
    if getattr(args, "argv", "absent") is None:
        args.argv = ["fedrr", *(argv if argv is not None else sys.argv[1:])]
    try:
        return args.func(args)
    except ValidationError as exc:
        print(f"fedrr: error: {exc}", file=sys.stderr)
        return 2
    except FedrrError as exc:
        print(f"fedrr: failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("fedrr: interrupted; rerun the same command to resume (finished cells are kept)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
