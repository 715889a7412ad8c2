#!/usr/bin/env bash
# The learner's update for the convolutional networks beside PyTorch's,
# interleaved in rounds (a VM's speed drifts over minutes): sebulba's
# `bench learner` and ../shared/bench/torch_cnn_ppo_update.py on the same
# shapes, batch, minibatch, epochs and threads. Prints one line per figure.
#
#   TORCH_PYTHON=/path/to/venv/bin/python scripts/bench-cnn.sh [rounds]
#
# SEBULBA (default target/release/sebulba), THREADS ("1 2"), NETS ("nature
# minatar impala"); without TORCH_PYTHON only sebulba's figures are printed.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
bin=${SEBULBA:-target/release/sebulba}
peer=../shared/bench/torch_cnn_ppo_update.py
[ -x "$bin" ] || { echo "no $bin: cargo build --release first" >&2; exit 1; }
nature=(--image 84,84,4 --samples 1024
  --set 'network.conv=[{channels=32,kernel=8,stride=4},{channels=64,kernel=4,stride=2},{channels=64,kernel=3}]'
  --set 'network.hidden=[512]' --set ppo.minibatches=4)
minatar=(--image 10,10,4 --samples 8192
  --set 'network.conv=[{channels=16,kernel=3}]' --set 'network.hidden=[128]' --set ppo.minibatches=8)
impala=(--image 84,84,4 --samples 1024
  --set 'network.stacks=[{channels=16},{channels=32},{channels=32}]' --set 'network.hidden=[256]'
  --set ppo.minibatches=4)
common=(--set network.activation=relu --set network.shared_torso=true --set ppo.epochs=4 --updates 3)
torch_nature=(--net nature --batch 1024 --minibatch 256)
torch_impala=(--net impala --batch 1024 --minibatch 256)
torch_minatar=(--net minatar --obs 10,10,4 --actions 3 --batch 8192 --minibatch 1024)
for round in $(seq "$rounds"); do
  for threads in ${THREADS:-1 2}; do
    for net in ${NETS:-nature minatar impala}; do
      declare -n ours="$net" theirs="torch_$net"
      figure=$("$bin" bench learner --env CartPole-v1 "${ours[@]}" "${common[@]}" \
        --set learner.threads="$threads" 2>/dev/null |
        sed -n 's/.*"sample_grads_per_second": \([0-9]*\).*/\1/p')
      echo "round $round $net threads $threads sebulba $figure"
      if [ -n "${TORCH_PYTHON:-}" ]; then
        figure=$("$TORCH_PYTHON" "$peer" "${theirs[@]}" --threads "$threads" --updates 3 |
          sed -n 's/.*"samples_per_s": \([0-9]*\).*/\1/p')
        echo "round $round $net threads $threads pytorch $figure"
      fi
    done
  done
done
