#!/usr/bin/env bash
# Two builds of sebulba, the same deterministic runs (run.deterministic=true):
# their metrics.jsonl and eval.jsonl must be identical but for the fields
# that time things (the list tests/deterministic.rs leaves out). For a
# refactor that must not change a number.
#
#   scripts/same-numbers.sh OLD_BINARY NEW_BINARY [OUT_DIR]
#
# RUNS picks runs by name (default all): cartpole-fused cartpole-burn
# pendulum acrobot-dqn minatar bigtwo.
set -euo pipefail
old=$1 new=$2 out=${3:-$(mktemp -d)}
mkdir -p "$out"
declare -A runs=(
  [cartpole-fused]="--env CartPole-v1 --set learner.engine=fused"
  [cartpole-burn]="--env CartPole-v1 --total-steps 20000 --set learner.engine=burn"
  [pendulum]="--env Pendulum-v1 --total-steps 50000"
  [acrobot-dqn]="--env Acrobot-v1 --total-steps 30000"
  [minatar]="--env MinAtar/Breakout-v1 --total-steps 200000"
  [bigtwo]="--env BigTwo-v1 --total-steps 100000 --set run.time_limit_secs=0"
)
status=0
for name in ${RUNS:-cartpole-fused cartpole-burn pendulum acrobot-dqn minatar bigtwo}; do
  for side in old new; do
    bin=${!side}
    # shellcheck disable=SC2086
    "$bin" local ${runs[$name]} --seed 1 --set run.deterministic=true \
      --run-dir "$out/$name-$side" --fresh >"$out/$name-$side.log" 2>&1
  done
  if python3 - "$out/$name-old" "$out/$name-new" <<'PY'
import json, sys
TIMING = {"wall_seconds", "steps_per_second", "update_seconds", "eval_seconds",
          "cpu_seconds", "throttled_seconds", "batches_received"}
def lines(d, f):
    return [{k: v for k, v in json.loads(l).items() if k not in TIMING}
            for l in open(f"{d}/{f}") if l.strip()]
a, b = sys.argv[1], sys.argv[2]
ok = True
for f in ("metrics.jsonl", "eval.jsonl"):
    x, y = lines(a, f), lines(b, f)
    same = x == y and len(x) > 0
    ok &= same
    print(f"  {f}: {len(x)} and {len(y)} lines, {'identical' if same else 'DIFFERENT'}")
sys.exit(0 if ok else 1)
PY
  then echo "$name: same numbers"; else echo "$name: NUMBERS DIFFER"; status=1; fi
done
exit $status
