#!/usr/bin/env bash
# The GPU learner's checks in one prepared call (issue 39), from a binary
# built elsewhere with `--features cuda` (the GPU machine has no Rust):
#
#   1. agreement: the same PPO updates on the fused CPU engine and on burn on
#      $DEVICE, from the same weights and batch (`sebulba bench agree`), for
#      the MLP, the Nature CNN and the MinAtar network;
#   2. the learner's update throughput on $DEVICE (`sebulba bench learner`)
#      for the three networks at several batch sizes, with nvidia-smi's
#      utilisation sampled meanwhile where it exists;
#   3. the peer: PyTorch's update throughput for the same networks on the same
#      device (`torch_cnn_ppo_update.py` from $PEERS), where $PYTHON has torch.
#
# Everything it measures goes to $OUT (figures as JSON, one summary.txt).
#
#   scripts/device-check.sh             on a GPU machine: DEVICE=cuda:0
#   scripts/device-check.sh --dry-run   on a CPU (what CI runs): DEVICE=cpu,
#                                       small batches, one update each
#
# SEBULBA: the binary (default ./sebulba, then target/release/sebulba);
# OUT: the output folder (default ./device-out); PEERS: the folder with
# torch_cnn_ppo_update.py (default ../shared/bench; carry a copy to a GPU
# machine); PYTHON (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."

dry=0
[ "${1:-}" = "--dry-run" ] && dry=1
bin=${SEBULBA:-}
if [ -z "$bin" ]; then
  for b in ./sebulba target/release/sebulba; do [ -x "$b" ] && { bin=$b; break; }; done
fi
[ -n "$bin" ] && [ -x "$bin" ] || { echo "device-check: no sebulba binary (set SEBULBA)" >&2; exit 1; }
out=${OUT:-device-out}
peers=${PEERS:-../shared/bench}
python=${PYTHON:-python3}
mkdir -p "$out"
summary="$out/summary.txt"
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }

if [ $dry = 1 ]; then
  device=${DEVICE:-cpu}
  torch_device=cpu
  # burn's CPU convolution takes about 5 minutes for one update of 16 of
  # the Nature CNN's 84x84 frames here: the dry run's frames are 36x36
  # (every layer still there, the last one 1x1).
  frame=36,36,4
  mlp_sizes="256"
  cnn_sizes="64"
  minatar_sizes="256"
  updates=1
else
  device=${DEVICE:-cuda:0}
  torch_device=cuda
  frame=84,84,4
  mlp_sizes="4096 65536"
  cnn_sizes="1024 4096 16384"
  minatar_sizes="8192 65536"
  updates=3
fi

# The networks, as `bench learner`/`bench agree` flags and as the peer's.
common=(--env CartPole-v1 --set network.activation=relu --set network.shared_torso=true
  --set ppo.epochs=4)
mlp=(--set 'network.hidden=[64,64]' --set ppo.minibatches=4)
nature=(--image "$frame"
  --set 'network.conv=[{channels=32,kernel=8,stride=4},{channels=64,kernel=4,stride=2},{channels=64,kernel=3}]'
  --set 'network.hidden=[512]' --set ppo.minibatches=4)
minatar=(--image 10,10,4 --set 'network.conv=[{channels=16,kernel=3}]'
  --set 'network.hidden=[128]' --set ppo.minibatches=8)

# net_flags NET: that network's flags into `flags`; net_sizes NET: its batch sizes.
net_flags() {
  case $1 in
    mlp) flags=("${mlp[@]}") ;;
    nature) flags=("${nature[@]}") ;;
    minatar) flags=("${minatar[@]}") ;;
  esac
}
net_sizes() {
  case $1 in
    mlp) echo "$mlp_sizes" ;;
    nature) echo "$cnn_sizes" ;;
    minatar) echo "$minatar_sizes" ;;
  esac
}

# The value of a "key": number pair in a JSON file.
field() { sed -n "s/.*\"$2\": \([-0-9.eE+a-z]*\).*/\1/p" "$1" | head -n 1; }

say "device-check $(date -u +%FT%TZ) device $device dry_run $dry binary $bin"
"$bin" --version 2>/dev/null | tee -a "$summary" || true
if command -v nvidia-smi >/dev/null; then
  nvidia-smi -L | tee -a "$summary" || true
fi

say "== 1. agreement: fused CPU engine against burn on $device"
failed=0
for net in mlp nature minatar; do
  net_flags "$net"
  samples=512
  [ $dry = 1 ] && samples=32
  [ "$net" = minatar ] && [ $dry = 0 ] && samples=2048
  # One epoch (4 or 8 minibatch steps): over more, these synthetic updates
  # amplify rounding until an engine nudged by 2.4e-7 parts from itself by
  # a tenth of the move (docs/experiments.md, 2026-11-27), and no comparison
  # can resolve anything finer.
  if "$bin" bench agree "${common[@]}" "${flags[@]}" --set ppo.epochs=1 --samples "$samples" \
    --learner-devices "$device" --json "$out/agree-$net.json" >"$out/agree-$net.log" 2>&1; then
    verdict=agrees
  else
    verdict=DISAGREES
    failed=1
  fi
  say "agree $net: $verdict (relative difference $(field "$out/agree-$net.json" relative_diff), tolerance $(field "$out/agree-$net.json" tolerance), rounding alone $(field "$out/agree-$net.json" rounding_floor))"
done

say "== 2. learner throughput on $device (sample-gradients/s)"
smi_pid=
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=timestamp,utilization.gpu,utilization.memory,memory.used \
    --format=csv -lms 500 >"$out/nvidia-smi.csv" 2>/dev/null &
  smi_pid=$!
fi
for net in mlp nature minatar; do
  net_flags "$net"
  for samples in $(net_sizes "$net"); do
    json="$out/learner-$net-$samples.json"
    if "$bin" bench learner "${common[@]}" "${flags[@]}" --samples "$samples" \
      --updates "$updates" --learner-devices "$device" --json "$json" \
      >"$out/learner-$net-$samples.log" 2>&1; then
      say "learner $net $samples: $(field "$json" sample_grads_per_second) (engine $(sed -n 's/.*"engine": "\([a-z]*\)".*/\1/p' "$json"))"
    else
      say "learner $net $samples: FAILED (see learner-$net-$samples.log)"
      failed=1
    fi
  done
done
[ -n "$smi_pid" ] && kill "$smi_pid" 2>/dev/null || true

say "== 3. peer: PyTorch on $torch_device (sample-gradients/s)"
if [ ! -f "$peers/torch_cnn_ppo_update.py" ]; then
  say "peer: no $peers/torch_cnn_ppo_update.py (set PEERS)"
elif ! "$python" -c 'import torch, numpy' 2>/dev/null; then
  say "peer: $python has no torch here; the GPU machine's python3 has it"
else
  for net in nature minatar; do
    for samples in $(net_sizes "$net"); do
      case $net in
        nature) args=(--net nature --obs "$frame" --batch "$samples" --minibatch $((samples / 4))) ;;
        minatar) args=(--net minatar --obs 10,10,4 --batch "$samples" --minibatch $((samples / 8))) ;;
      esac
      if "$python" "$peers/torch_cnn_ppo_update.py" "${args[@]}" --actions 2 --updates "$updates" \
        --device "$torch_device" >"$out/torch-$net-$samples.json" 2>"$out/torch-$net-$samples.log"; then
        say "pytorch $net $samples: $(field "$out/torch-$net-$samples.json" samples_per_s)"
      else
        say "pytorch $net $samples: FAILED (see torch-$net-$samples.log)"
        failed=1
      fi
    done
  done
fi

if [ $failed = 1 ]; then
  say "device-check: FAILED"
  exit 1
fi
say "device-check: done"
