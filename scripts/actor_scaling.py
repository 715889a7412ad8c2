#!/usr/bin/env python3
"""Env steps/s against the number of actor processes: for each N in --actors,
starts a param-server, a learner, an evaluator (scoring rarely) and N
`sebulba actor` processes on loopback, waits for the learner to finish
--steps env steps, and prints the run's env steps/s and the share per actor.
Each actor process has its own Python interpreter, so Python envs scale here
as they do in a cluster.

    scripts/actor_scaling.py --actors 1,2 -- --env gym:HalfCheetah-v5 \\
        --config configs/mujoco.toml

Everything after `--` goes to the learner. The binary is
target/release/sebulba unless --bin says otherwise (build it with
`--features python` for Python envs).
"""

import argparse
import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from seeds import lines  # scripts/ is on the path when run as a script


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one(binary, n, steps, out, rest):
    run_dir = out / f"actors-{n}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    ps, lp = free_port(), free_port()
    ps_url, l_url = f"http://127.0.0.1:{ps}", f"http://127.0.0.1:{lp}"
    logs = []

    def spawn(name, args):
        log = open(run_dir / f"{name}.log", "w")
        logs.append(log)
        return subprocess.Popen([binary, *args], stdout=log, stderr=log)

    procs = [spawn("param-server", ["param-server", "--listen", f"127.0.0.1:{ps}"])]
    procs.append(spawn("evaluator", ["evaluator", "--param-server", ps_url, "--interval", "100000",
                                     "--episodes", "1", "--final-episodes", "1",
                                     "--run-dir", str(run_dir / "run")]))
    for i in range(n):
        procs.append(spawn(f"actor-{i}", ["actor", "--learner", l_url, "--param-server", ps_url,
                                          "--name", f"scaling-{i}"]))
    learner = spawn("learner", ["learner", "--listen", f"127.0.0.1:{lp}", "--param-server", ps_url,
                                "--total-steps", str(steps), "--run-dir", str(run_dir / "run"),
                                "--set", f"run.local_actors={n}", *rest])
    try:
        learner.wait(timeout=1800)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        for log in logs:
            log.close()
    summary = json.loads((run_dir / "run" / "summary.json").read_text())
    metrics = lines(run_dir / "run" / "metrics.jsonl")
    # Steady state: from the update after the first 10% of steps to the last.
    start = next(m for m in metrics if m["env_steps"] >= steps * 0.1)
    end = metrics[-1]
    sps = (end["env_steps"] - start["env_steps"]) / (end["wall_seconds"] - start["wall_seconds"])
    return summary, sps


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--actors", default="1,2", help="comma-separated actor process counts")
    ap.add_argument("--steps", type=int, default=200_000)
    ap.add_argument("--bin", default="target/release/sebulba")
    ap.add_argument("--out", default="/tmp/sebulba-scaling")
    ap.add_argument("rest", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    rest = a.rest[1:] if a.rest[:1] == ["--"] else a.rest
    out = Path(a.out)
    print(f"{'actors':>6} {'env steps/s':>12} {'per actor':>10} {'whole run':>10} {'updates':>8}")
    for n in [int(x) for x in a.actors.split(",")]:
        s, sps = one(a.bin, n, a.steps, out, rest)
        whole = s["env_steps"] / s["wall_seconds"]
        print(f"{n:>6} {sps:>12.0f} {sps / n:>10.0f} {whole:>10.0f} {s['updates']:>8}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
