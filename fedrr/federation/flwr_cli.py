"""``flwr run .`` for this app, with the flwr 1.41 pitfalls handled (``python -m fedrr.federation.flwr_cli``).

What it does, in order:
* checks, before ``flwr`` starts (one line and exit status 2 otherwise): the overrides parse (an
  unquoted string is named), every key is fedrr's and in the app's ``[tool.flwr.app.config]`` (a
  custom population's own option too: Flower refuses any other), the population builds at the
  requested N, has clients, and releases one record per distinct mechanism that validates, and every
  learner takes those mechanisms (``check_run_config``);
* writes a SuperLink connection into ``$FLWR_HOME/config.toml`` (flwr 1.41 keeps connections
  there, not in pyproject.toml): ``address = ":local:"`` (flwr lazily starts a local simulation
  SuperLink) or, with ``--superlink HOST:PORT``, an existing SuperLink: over TLS, verified with
  ``--root-certificates CA.crt`` (``root-certificates = "/abs/CA.crt"``), else ``insecure = true``;
* runs ``flwr run <app> <connection> --stream --run-config <file.toml>`` with the simulation size
  as ``--federation-config "num-supernodes=N client-resources-num-cpus=C"`` (integers only);
  ``results-dir`` is made absolute (the ServerApp runs in the SuperLink's working directory,
  i.e. wherever the ``flwr`` that first started it was run, not where you are now);
* the local SuperLink picks free ports (``FLWR_LOCAL_SUPERLINK_HTTP_API_PORT``,
  ``FLWR_LOCAL_CONTROL_API_PORT``) so it never attaches to someone else's SuperLink on the fixed
  default ports; afterwards it stops that SuperLink and everything under it (SuperExec,
  ``flwr-simulation``, Ray) by pid — ``flwr`` itself leaves it running, detached;
* restores ``pyproject.toml`` if ``flwr`` rewrote it (it comments out a legacy
  ``[tool.flwr.federations]`` section when it migrates one);
* exits non-zero unless ``metrics.json`` says ``"done"`` (``flwr run`` exits 0 even when the
  ServerApp failed).

Example: ``python -m fedrr.federation.flwr_cli -c "n-clients=30 learners='naive'"``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
import uuid
from pathlib import Path

import tomli_w

from .._procs import alive, cmdline, descendants, find_superlinks, free_port, proc_stat, stop  # noqa: F401
from ..errors import ValidationError

QUIET_ENV = {
    "FLWR_TELEMETRY_ENABLED": "0",
    "FLWR_DISABLE_UPDATE_CHECK": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0",
    "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
}
LOCAL_CONNECTION = "fedrr-local"
DEPLOY_CONNECTION = "fedrr-deploy"


# ------------------------------------------------------------------------------- config
def write_connection(
    flwr_home: Path, name: str, address: str, insecure: bool = True, root_certificates: str | None = None
) -> Path:
    """Add/replace one SuperLink connection in ``$FLWR_HOME/config.toml`` and make it the default.
    With ``root_certificates`` (a CA certificate file) the connection is TLS, verified with it."""
    path = flwr_home / "config.toml"
    cfg = tomllib.loads(path.read_text()) if path.exists() else {}
    sl = cfg.setdefault("superlink", {})
    sl["default"] = name
    if address.startswith(":local"):
        sl[name] = {"address": address}
    elif root_certificates is not None:
        ca = Path(root_certificates).expanduser().resolve()  # flwr wants an absolute path
        if not ca.is_file():
            raise ValidationError("root_certificates", f"{ca} is not a file")
        sl[name] = {"address": address, "root-certificates": str(ca)}
    else:
        sl[name] = {"address": address, "insecure": insecure}
    flwr_home.mkdir(parents=True, exist_ok=True)
    path.write_text(tomli_w.dumps(cfg))
    return path


def run_config_overrides(app: Path, overrides: dict, cwd: Path) -> dict:
    """The overrides to send: the user's, plus an absolute ``results-dir`` and a ``run-name``
    (so the caller knows where the metrics land)."""
    project = tomllib.loads((app / "pyproject.toml").read_text())
    defaults = project["tool"]["flwr"]["app"].get("config", {})
    out = dict(overrides)
    rd = out.get("results-dir")
    out["results-dir"] = (
        str((cwd / rd).resolve()) if rd else str((app / defaults.get("results-dir", "results/federation")).resolve())
    )
    if not out.get("run-name"):
        out["run-name"] = time.strftime("run-%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
    return out


def check_run_config(app: Path, overrides: dict):
    """The run config Flower will carry (the app's defaults with the overrides), validated as the
    ServerApp will: Flower itself answers a misspelt key, or a key the app's table lacks, only with
    "Invalid run configuration". Then the population is built at the requested N, releases one
    record per distinct mechanism, and every learner accepts those mechanisms."""
    from ..assembly import checked_population
    from ..learners import check_accepts
    from ..run_config import RunConfig

    table = app / "pyproject.toml"
    defaults = tomllib.loads(table.read_text())["tool"]["flwr"]["app"].get("config", {})
    cfg = RunConfig.from_flwr({**defaults, **overrides})
    for key in overrides:
        if key not in defaults:  # a custom population's own option: valid for fedrr, not for flwr run
            raise ValidationError(
                key,
                f"{cfg.population_name()}'s option is not in [tool.flwr.app.config] of {table}, and flwr run "
                f"accepts no other key: add a line '{key} = <default>' to that table",
            )
    _, mechanisms = checked_population(cfg)
    check_accepts(cfg.learners, mechanisms[0] if len(mechanisms) == 1 else mechanisms, population=cfg.population_name())
    return cfg


#: one ``key=value`` pair of a --run-config string, as flwr splits them (flwr.common.config.parse_config_args)
_PAIR = re.compile(r"(\S+?)=(\'[^\']*\'|\"[^\"]*\"|\S+)")


def parse_overrides(items: list[str] | None) -> dict:
    """The --run-config overrides, parsed as flwr parses them; a value that is not TOML (an unquoted
    string) is one ValidationError naming its key, not flwr's traceback."""
    import click
    from flwr.common.config import parse_config_args

    try:
        return parse_config_args(items) if items else {}
    except (click.ClickException, ValueError):
        for item in items:
            for key, value in _PAIR.findall(item):
                try:
                    tomllib.loads(f"{key} = {value}")
                except tomllib.TOMLDecodeError:
                    raise ValidationError(
                        key, f"{value} is not a TOML value: quote strings, as in -c \"{key}='{value}'\""
                    ) from None
        raise ValidationError("--run-config", f"{items!r} is not 'key=value' pairs separated by spaces") from None


# ---------------------------------------------------------------------------------- run
def flwr_run(  # noqa: PLR0913  keyword-only options of one `flwr run` invocation
    app: str | os.PathLike = ".",
    *,
    run_config: dict | None = None,
    flwr_home: str | os.PathLike | None = None,
    superlink: str | None = None,
    root_certificates: str | os.PathLike | None = None,
    num_supernodes: int | None = None,
    client_cpus: int = 1,
    timeout: float = 1800.0,
    cwd: str | os.PathLike | None = None,
    flwr: str | None = None,
    log=print,
) -> dict:
    """Run the app once with ``flwr run``; returns {"metrics", "metrics_path", "run_config",
    "returncode", "pids" (every SuperLink-side process seen, all stopped), "survivors", "output"}.
    ``superlink`` is a running SuperLink; with ``root_certificates`` (its CA certificate) over TLS."""
    if root_certificates is not None and not superlink:
        raise ValidationError("root_certificates", "only for a running SuperLink (pass superlink='HOST:PORT')")
    app = Path(app).resolve()
    cwd = Path(cwd or os.getcwd()).resolve()
    flwr_home = Path(flwr_home).resolve() if flwr_home else app / ".flwr"
    flwr = flwr or shutil.which("flwr", path=str(Path(sys.executable).parent)) or "flwr"
    overrides = run_config_overrides(app, dict(run_config or {}), cwd)
    from .._user_code import START_DIR_ENV, mark_start_dir

    mark_start_dir(cwd)  # the checks read a table or import a population from where the run starts, as the apps will
    cfg = check_run_config(app, overrides)  # a typo is refused here, naming the key, before flwr starts
    for note in cfg.budget_notes():
        log(note)

    env = {**os.environ, **QUIET_ENV, "FLWR_HOME": str(flwr_home)}
    env[START_DIR_ENV] = str(cwd)  # the apps import a population module from where the run started
    env["PATH"] = (
        f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # flwr spawns flower-superlink by name
    )
    pyproject = app / "pyproject.toml"
    original = pyproject.read_bytes()

    cmd = [flwr, "run", str(app)]
    sl_port = None
    if superlink:  # a SuperLink somebody else runs (deployment): nothing to stop afterwards
        write_connection(
            flwr_home,
            DEPLOY_CONNECTION,
            superlink,
            root_certificates=str(root_certificates) if root_certificates else None,
        )
        cmd += [DEPLOY_CONNECTION]
    else:
        write_connection(flwr_home, LOCAL_CONNECTION, ":local:")
        sl_port = free_port()
        env["FLWR_LOCAL_SUPERLINK_HTTP_API_PORT"] = str(sl_port)
        env["FLWR_LOCAL_CONTROL_API_PORT"] = str(free_port())  # deprecated in 1.41 but still passed along
        n = num_supernodes or cfg.n_nodes
        cmd += [
            LOCAL_CONNECTION,
            "--federation-config",
            f"num-supernodes={int(n)} client-resources-num-cpus={int(client_cpus)}",
        ]
    fd, cfg_file = tempfile.mkstemp(prefix="fedrr-run-config-", suffix=".toml")
    with os.fdopen(fd, "w") as f:
        f.write(tomli_w.dumps(overrides))
    cmd += ["--stream", "--run-config", cfg_file]
    log("[fedrr] " + " ".join(cmd))

    seen: set[tuple[int, int]] = set()
    output: list[str] = []
    proc = subprocess.Popen(
        cmd, cwd=app, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    returncode = None
    try:

        def pump():
            for line in proc.stdout:
                output.append(line)
                log(line.rstrip("\n"))

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            if sl_port is not None:  # keep track of everything the local SuperLink starts (Ray included)
                for pid in find_superlinks(sl_port):
                    seen |= descendants(pid)
            time.sleep(0.5)
        if proc.poll() is None:
            log(f"[fedrr] flwr run did not finish within {timeout:.0f} s; stopping it")
            stop(descendants(proc.pid))
        returncode = proc.wait(timeout=30)
        reader.join(timeout=10)
    finally:
        if proc.poll() is None:  # interrupted: stop flwr itself
            stop(descendants(proc.pid))
        os.unlink(cfg_file)
        survivors: set = set()
        if sl_port is not None:
            # let flwr-simulation finish shutting Ray down (its children would be orphaned otherwise)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                links = find_superlinks(sl_port)
                tree = set().union(*(descendants(p) for p in links)) if links else set()
                seen |= tree
                if not any(any("flwr-simulation" in c for c in cmdline(p)) for p, _ in tree):
                    break
                time.sleep(0.2)
            links = {(p, proc_stat(p)[1]) for p in find_superlinks(sl_port) if proc_stat(p)}
            survivors = stop(links) or set()  # the SuperLink first: it ends its SuperExec
            survivors |= stop(seen - links)  # then anything left below it, by pid
        if pyproject.read_bytes() != original:
            pyproject.write_bytes(original)
            log(f"[fedrr] flwr rewrote {pyproject}; restored it")
    metrics_path = Path(overrides["results-dir"]) / overrides["run-name"] / "metrics.json"
    metrics = json.loads(metrics_path.read_text()) if metrics_path.exists() else None
    return {
        "metrics": metrics,
        "metrics_path": str(metrics_path),
        "run_config": overrides,
        "returncode": returncode,
        "pids": sorted(p for p, _ in seen),
        "survivors": sorted(p for p, _ in survivors),
        "output": "".join(output),
    }


def _run_from_args(args) -> dict:
    return flwr_run(
        args.app,
        run_config=parse_overrides(args.run_config),
        flwr_home=args.flwr_home,
        superlink=args.superlink,
        root_certificates=args.root_certificates,
        num_supernodes=args.num_supernodes,
        client_cpus=args.client_cpus,
        timeout=args.timeout,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fedrr.federation.flwr_cli", description=__doc__.split("\n\n")[0])
    ap.add_argument("app", nargs="?", default=".", help="the Flower app directory (holds pyproject.toml)")
    ap.add_argument(
        "-c",
        "--run-config",
        action="append",
        help="run-config overrides, as for flwr run: \"n-clients=30 learners='naive'\"",
    )
    ap.add_argument("--flwr-home", help="FLWR_HOME to use (default: <app>/.flwr)")
    ap.add_argument("--superlink", help="HOST:PORT of a running SuperLink (deployment); default: a local simulation")
    ap.add_argument(
        "--root-certificates",
        metavar="CA_CERT",
        help="with --superlink: connect over TLS, verifying the SuperLink with this CA certificate "
        "(without it the connection is insecure)",
    )
    ap.add_argument("--num-supernodes", type=int, help="simulated nodes (default: from n-clients and cohort-size)")
    ap.add_argument("--client-cpus", type=int, default=1, help="CPUs per ClientApp (an integer in flwr 1.41)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds before the run is stopped")
    ap.add_argument("--json", action="store_true", help="print a JSON summary (metrics path, pids) as the last line")
    args = ap.parse_args(argv)
    if args.root_certificates and not args.superlink:
        ap.error("--root-certificates needs --superlink")
    try:
        res = _run_from_args(args)
    except ValidationError as exc:
        print(f"[fedrr] error: {exc}", file=sys.stderr)
        return 2
    status = (res["metrics"] or {}).get("status", "no metrics written")
    print(f"[fedrr] status: {status}; metrics: {res['metrics_path']}", file=sys.stderr)
    if res["survivors"]:
        print(f"[fedrr] could not stop processes {res['survivors']}", file=sys.stderr)
    if args.json:
        print(json.dumps({k: v for k, v in res.items() if k != "output"}, default=str))
    return 0 if status == "done" and not res["survivors"] else 1


if __name__ == "__main__":
    sys.exit(main())
