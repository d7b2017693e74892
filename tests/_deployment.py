"""A real Flower 1.41 deployment on 127.0.0.1 for the deployment tests: one ``flower-superlink``
with TLS and SuperNode authentication, SuperNodes in fedrr's deployment mode, the app started with
``flwr run`` (through ``fedrr.federation.flwr_cli``). Nothing is mocked.

* credentials: ``fedrr.federation.create_credentials`` (CA, server cert, node keys);
* SuperLink: ``--ssl-ca-certfile/--ssl-certfile/--ssl-keyfile --enable-supernode-auth``;
* keys registered with the real CLI, ``flwr supernode register KEY.pub CONNECTION``;
* SuperNodes: ``--root-certificates ca.crt --auth-supernode-private-key node-<i>.key`` and node
  config ``ledger-dir``, ``record-file``, ``node-public-key``.

Every process is started by ``Processes``, tracked by pid (with its children) and stopped by the
fixture's teardown, which fails if any is left."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx

from fedrr._procs import _live_pids, alive, cmdline, descendants, free_port, stop
from fedrr.assembly import build_population
from fedrr.federation import create_credentials
from fedrr.federation.flwr_cli import DEPLOY_CONNECTION, QUIET_ENV, flwr_run, write_connection
from fedrr.mechanisms import RandomizedResponse, RecordMechanism
from fedrr.release import write_record_file
from fedrr.run_config import RunConfig

BIN = Path(sys.executable).parent
N_NODES = 5
MECH = RecordMechanism(RandomizedResponse(17, 0.2), RandomizedResponse(2, 0.1), n_features=64)


class Processes:
    """Processes a test started; ``stop_all`` ends them and whatever they spawned, by pid."""

    def __init__(self, root: Path):
        self.root, self.procs, self.seen = root, {}, set()

    def env(self, flwr_home: Path) -> dict:
        return {
            **os.environ,
            **QUIET_ENV,
            "FLWR_HOME": str(flwr_home),
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",  # they spawn flower-superexec by name
        }

    def start(self, name: str, cmd: list[str], flwr_home: Path) -> subprocess.Popen:
        flwr_home.mkdir(parents=True, exist_ok=True)
        log = open(self.root / f"{name}.log", "a")
        p = subprocess.Popen(
            cmd, cwd=flwr_home, env=self.env(flwr_home), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        self.procs[name] = p  # the latest process of that name (a restart replaces it here)
        self.procs[f"{name}@{p.pid}"] = p  # every process ever started, for stop_all
        self.track()
        return p

    def track(self) -> None:
        for p in self.procs.values():
            self.seen |= descendants(p.pid)
        self.seen |= self.orphans()

    def orphans(self) -> set:
        """Processes Flower started with ``--parent-pid PID`` for one of ours, whose parent exited
        before they were seen below it (a refused SuperNode starts its SuperExec while exiting)."""
        ours = {p.pid for p in self.procs.values()}
        found = set()
        for pid in _live_pids():
            cmd = cmdline(pid)
            if "--parent-pid" in cmd[:-1] and cmd[cmd.index("--parent-pid") + 1] in {str(o) for o in ours}:
                found |= descendants(pid)
        return found

    def tree(self, name: str) -> set:
        self.track()
        return descendants(self.procs[name].pid)

    def stop_all(self) -> set:
        self.track()
        pids = {p.pid for p in self.procs.values()}
        tops = {(pid, s) for (pid, s) in self.seen if pid in pids}
        left = stop(tops, timeout=15)
        left |= stop(self.seen - tops, timeout=10)
        for p in self.procs.values():
            try:
                p.wait(timeout=5)  # reap
            except subprocess.TimeoutExpired:
                pass
        return alive(self.seen) | left | self.orphans()

    def log(self, name: str, tail: int = 3000) -> str:
        p = self.root / f"{name}.log"
        return p.read_text(errors="replace")[-tail:] if p.exists() else ""


def records(n: int):
    """n clean training rows of digits 7 vs 9 (classes alternating, so both labels are present)."""
    pop = build_population(RunConfig.from_flwr({"n-clients": 1000}))  # same seed/test split as the server's
    rows: dict[int, list] = {0: [], 1: []}
    for j in range(pop.n_train):
        x, y = pop.record(j)
        rows[y].append(x)
    return [(rows[i % 2][i // 2], i % 2) for i in range(n)]


class Deployment:
    """The SuperLink, the N registered SuperNodes, and helpers to start more nodes and run the app.
    ``creds`` holds N + 2 key pairs: 0..N-1 for the nodes, N never registered, N + 1 spare."""

    def __init__(self, tmp: Path, app: Path):
        self.tmp, self.app = tmp, app
        self.procs = Processes(tmp)
        self.creds = create_credentials(tmp / "creds", N_NODES + 2)
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.cli_home = tmp / "cli-home"
        self.tls = ssl.create_default_context(cafile=str(self.creds.ca_cert))
        self.nodes: list[dict] = []
        self.node_ids: list[int] = []

    # ------------------------------------------------------------------ the pieces
    def start_superlink(self) -> None:
        c = self.creds
        cmd = [str(BIN / "flower-superlink"), "--ssl-ca-certfile", str(c.ca_cert), "--ssl-certfile"]
        cmd += [str(c.server_cert), "--ssl-keyfile", str(c.server_key), "--enable-supernode-auth"]
        cmd += ["--host", "127.0.0.1", "--port", str(self.port), "--disable-runtime-dependency-installation"]
        sl = self.procs.start("superlink", cmd, self.tmp / "superlink")
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline:
            assert sl.poll() is None, "flower-superlink exited early:\n" + self.procs.log("superlink")
            try:
                if httpx.get(f"https://{self.address}/health", timeout=0.5, verify=self.tls).is_success:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        else:
            raise TimeoutError(f"flower-superlink not healthy on {self.address} over TLS")
        write_connection(self.cli_home, DEPLOY_CONNECTION, self.address, root_certificates=str(c.ca_cert))

    def flwr(self, *args: str) -> subprocess.Popen:
        """The real ``flwr`` CLI against this SuperLink (the TLS connection in cli-home)."""
        return subprocess.Popen(
            [str(BIN / "flwr"), *args],
            env=self.procs.env(self.cli_home),
            cwd=self.cli_home,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def register(self, pubs) -> list[int]:
        """``flwr supernode register KEY.pub fedrr-deploy`` for each key (in parallel); node ids."""
        ps = [self.flwr("supernode", "register", str(p), DEPLOY_CONNECTION, "--format", "json") for p in pubs]
        ids = []
        for p in ps:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, (out, err)
            ids.append(int(json.loads(out)["node-id"]))
        return ids

    def listed_nodes(self) -> dict[int, str]:
        """node id -> status, as ``flwr supernode ls`` (Control API) reports the SuperLink's nodes."""
        p = self.flwr("supernode", "ls", DEPLOY_CONNECTION, "--format", "json")
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, (out, err)
        return {int(n["node-id"]): n["status"] for n in json.loads(out)["nodes"]}

    def start_node(self, name: str, node_config: str, key=None, tls: bool = True, max_wait: float = 120):
        """A ``flower-supernode``: TLS verified with the CA (or ``--insecure``), optionally a key."""
        cmd = [str(BIN / "flower-supernode")]
        cmd += ["--root-certificates", str(self.creds.ca_cert)] if tls else ["--insecure"]
        if key is not None:
            cmd += ["--auth-supernode-private-key", str(key)]
        cmd += ["--superlink", self.address, "--host", "127.0.0.1", "--port", str(free_port())]
        cmd += ["--max-wait-time", str(max_wait), "--node-config", node_config]
        return self.procs.start(name, cmd, self.tmp / name / "home")

    def node_dir(self, name: str, x, y, client_id: int) -> Path:
        d = self.tmp / name
        d.mkdir(parents=True, exist_ok=True)
        write_record_file(d / "record.npz", x, y, MECH, client_id=client_id)
        return d

    @staticmethod
    def config(d: Path, partition: int, public_key=None, ledger: Path | None = None) -> str:
        cfg = f"partition-id={partition} ledger-dir='{ledger or d / 'ledger'}' record-file='{d / 'record.npz'}'"
        return cfg + (f" node-public-key='{public_key}'" if public_key is not None else "")

    def start(self) -> None:
        """SuperLink, keys 0..N-1 registered, N SuperNodes (node i: key i, client id i)."""
        self.start_superlink()
        self.node_ids = self.register(self.creds.node_public_keys[:N_NODES])
        for i, (x, y) in enumerate(records(N_NODES)):
            d = self.node_dir(f"node{i}", x, y, i)
            cfg = self.config(d, i, self.creds.node_public_keys[i])
            self.start_node(f"node{i}", cfg, key=self.creds.node_keys[i])
            self.nodes.append({"dir": d, "ledger": d / "ledger" / "fedrr-release.npz", "x": x, "y": y, "config": cfg})

    def run(self, name: str, **overrides) -> dict:
        """``flwr run`` over TLS; asserts the run finished."""
        cfg = {
            "n-clients": N_NODES,
            "min-valid": N_NODES,
            "learners": "naive",
            "node-wait-timeout": 60.0,
            "reply-timeout": 90.0,
            "results-dir": str(self.tmp / "results"),
            "run-name": name,
            "accept-mechanisms": "declared",  # the nodes hold their own records and mechanisms (record files)
            "max-record-epsilon": MECH.epsilon,
        }
        res = flwr_run(
            self.app,
            superlink=self.address,
            root_certificates=self.creds.ca_cert,
            flwr_home=self.cli_home,
            timeout=600,
            run_config={**cfg, **overrides},
            log=lambda s: None,
        )
        self.procs.track()
        assert res["metrics"] is not None, (res["output"][-3000:], self.procs.log("superlink"), self.procs.log("node0"))
        assert res["metrics"]["status"] == "done", res["metrics"]
        return res
