#!/usr/bin/env python3
"""Runs `sebulba bench local` once per seed and prints the per-seed figures
and their medians: final evaluation, best evaluation, env steps to the first
evaluation reaching --target, wall time, and the policy lag the learner saw.

    scripts/seeds.py --seeds 1-10 --target 475 -- --env CartPole-v1 --actors 8 \\
        --set learner.max_policy_lag=4 --set ppo.lag_correction=vtrace

Everything after `--` goes to `sebulba bench local` as it is. The binary is
target/release/sebulba unless --bin says otherwise; run directories go under
--out (default /tmp/sebulba-seeds) and are replaced.
"""

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path


def seed_list(text):
    seeds = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        seeds.extend(range(int(lo), int(hi or lo) + 1))
    return seeds


def lines(path):
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


def one(binary, seed, target, out, rest):
    run_dir = out / f"seed-{seed}"
    shutil.rmtree(run_dir, ignore_errors=True)
    cmd = [binary, "bench", "local", "--seed", str(seed), "--run-dir", str(run_dir)]
    if target is not None:
        cmd += [f"--target-return={target}"]
    cmd += ["--json", str(out / f"seed-{seed}.json")] + rest
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"seed {seed} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    r = json.loads((out / f"seed-{seed}.json").read_text())
    evals = lines(run_dir / "eval.jsonl")
    metrics = lines(run_dir / "metrics.jsonl")
    lags = [m["policy_lag"]["mean"] for m in metrics]
    return {
        "seed": seed,
        "final": r["final_eval_return_mean"],
        "best": max((e["return_mean"] for e in evals), default=None),
        "steps_to_target": r.get("steps_to_target"),
        "env_steps": r["env_steps"],
        "wall": r["wall_seconds"],
        "lag_mean": sum(lags) / max(len(lags), 1),
        "lag_max": max((m["policy_lag"]["max"] for m in metrics), default=0),
        "stale": metrics[-1]["batches_dropped_stale"] if metrics else 0,
    }


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="1-3")
    ap.add_argument("--target", type=float)
    ap.add_argument("--bin", default="target/release/sebulba")
    ap.add_argument("--out", default="/tmp/sebulba-seeds")
    ap.add_argument("--label", default="")
    ap.add_argument("rest", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    rest = a.rest[1:] if a.rest[:1] == ["--"] else a.rest
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = [one(a.bin, s, a.target, out, rest) for s in seed_list(a.seeds)]
    for r in rows:
        print(
            f"{a.label} seed {r['seed']:2}: final {r['final']}, best {r['best']}, "
            f"steps to {a.target}: {r['steps_to_target']}, {r['env_steps']} steps in "
            f"{r['wall']:.1f} s, lag mean {r['lag_mean']:.2f} max {r['lag_max']}, "
            f"stale {r['stale']}"
        )
    reached = sum(r["steps_to_target"] is not None for r in rows)
    print(
        f"{a.label} median over {len(rows)} seeds: steps to {a.target} "
        f"{median(r['steps_to_target'] for r in rows)} ({reached} reached), "
        f"final {median(r['final'] for r in rows)}, wall {median(r['wall'] for r in rows):.1f} s, "
        f"lag mean {median(r['lag_mean'] for r in rows):.2f}"
    )
    print(json.dumps({"label": a.label, "args": rest, "rows": rows}))


if __name__ == "__main__":
    main()
