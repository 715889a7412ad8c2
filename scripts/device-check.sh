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
#      device (`torch_cnn_ppo_update.py` from $PEERS), where $PYTHON has torch;
#   4. training: `sebulba local --env $TRAIN_ENV` with `--learner-devices
#      auto` (a GPU when one answers) and the actors on the machine's cores,
#      until DEADLINE (then SIGINT), its run directory and log kept (curve,
#      env steps/s, summary.json with the device `auto` chose and why).
#
# Everything it measures goes to $OUT (figures as JSON, one summary.txt).
#
#   scripts/device-check.sh             on a GPU machine: DEVICE=cuda:0
#   scripts/device-check.sh --dry-run   on a CPU (what CI runs): DEVICE=cpu,
#                                       small batches, one update each
#
# SEBULBA: the binary (default: $PACK/sebulba.xz unpacked, else ./sebulba,
# then target/release/sebulba);
# OUT: the output folder (default ./device-out); PEERS: the folder with
# torch_cnn_ppo_update.py (default ../shared/bench; carry a copy to a GPU
# machine); PYTHON (default python3); PACK: the folder scripts/device-pack.sh
# wrote (default .device): its binary and Python runtime (for `ale:` ids) are
# unpacked; DEADLINE: seconds from the start by which everything must end
# (default 540 on a GPU, none in the dry run): each step is cut to what is
# left, and training gets what the others leave but at least TRAIN_MIN
# (default 240) seconds; TRAIN_ENV (default ale:Pong on a GPU,
# MinAtar/Breakout-v1 in the dry run) and TRAIN_SETS (its extra flags,
# space-separated); STEPS (default "agree learner peer train": which steps
# run); AGREE_NETS (default "mlp nature minatar"), MLP_SIZES, CNN_SIZES,
# MINATAR_SIZES (batch sizes); STEP_CAP (seconds one agreement or benchmark
# may take, default 150); CUBECL_CACHE (burn-cuda's kernel and tuning cache,
# default $PACK/cubecl-cache) and CUBECL_TUNING (cubecl's autotune level,
# default minimal).
set -euo pipefail
cd "$(dirname "$0")/.."

dry=0
[ "${1:-}" = "--dry-run" ] && dry=1
pack=${PACK:-.device}
bin=${SEBULBA:-}
bin_from=SEBULBA
if [ -z "$bin" ] && [ -f "$pack/sebulba.xz" ]; then
  bin=$(mktemp -d)/sebulba
  xz -dc "$pack/sebulba.xz" >"$bin"
  chmod +x "$bin"
  bin_from="$pack/sebulba.xz"
fi
if [ -z "$bin" ]; then
  for b in ./sebulba target/release/sebulba; do [ -x "$b" ] && { bin=$b; bin_from=$b; break; }; done
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
  deadline=${DEADLINE:-0}
  train_env=${TRAIN_ENV:-MinAtar/Breakout-v1}
  train_sets=${TRAIN_SETS:---total-steps 8192}
  train_min=0
else
  device=${DEVICE:-cuda:0}
  torch_device=cuda
  frame=84,84,4
  mlp_sizes=${MLP_SIZES:-4096 65536}
  cnn_sizes=${CNN_SIZES:-1024 4096 16384}
  minatar_sizes=${MINATAR_SIZES:-8192 65536}
  updates=3
  deadline=${DEADLINE:-540}
  train_env=${TRAIN_ENV:-ale:Pong}
  # 16 cores: 8 actors of 8 emulators, every actor's batch one update's
  # eighth (8,192 steps an update, CleanRL's 4 x 4 minibatches of it).
  train_sets=${TRAIN_SETS:---set run.local_actors=8 --set env.envs_per_actor=8 --set learner.batches_per_update=8 --set learner.queue_capacity=16 --set eval.interval=100}
  train_min=${TRAIN_MIN:-240}
fi

# Seconds a step may take: at most CAP, and (under a deadline) no more than
# leaves RESERVE seconds for what follows; 0 when nothing is left.
budget() {
  local cap=$1 reserve=$2
  if [ "$deadline" = 0 ]; then echo "$cap"; return; fi
  local left=$((deadline - SECONDS - reserve))
  [ "$left" -lt 0 ] && left=0
  [ "$left" -lt "$cap" ] && echo "$left" || echo "$cap"
}
# capped SECONDS CMD...: CMD under that limit (exit 124 past it, or at once at 0).
capped() {
  local t=$1
  shift
  [ "$t" -gt 0 ] || return 124
  timeout -k 10 "$t" "$@"
}

# CUDA: burn-cuda loads the driver (libcuda) and NVRTC at run time under
# their unversioned or major-versioned names. Put every folder holding them
# on the loader's path, and link the plain names where only versioned files
# exist (a pip wheel's libnvrtc.so.13, say).
if [ $dry = 0 ]; then
  links=$(mktemp -d)
  dirs=$links
  for name in libcuda libnvrtc libnccl; do
    found=$(find /usr/local/nvidia /usr/local/cuda/ /usr/local/cuda-*/ /usr/lib/x86_64-linux-gnu /opt \
      -name "$name.so*" -not -path '*/stubs/*' 2>/dev/null | head -n 1 || true)
    if [ -n "$found" ]; then
      ln -sf "$found" "$links/$name.so"
      dirs="$dirs:$(dirname "$found")"
    fi
    echo "cuda library $name: ${found:-none found}" >>"$out/libraries.txt"
  done
  export LD_LIBRARY_PATH="$dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # burn-cuda compiles every kernel with NVRTC and autotunes every new
  # shape on first use: minutes for a PPO update of the Nature CNN on an
  # H100 (2026-11-27), more than one call's budget. Its compiled kernels and
  # tuning results go to CUBECL_CACHE (default $PACK/cubecl-cache, carried
  # with the pack) and come back as $OUT/cubecl-cache.tgz: unpacked into the
  # pack, the next call starts warm. cubecl reads cubecl.toml from the
  # working directory (this checkout, a copy on the GPU machine).
  cache=${CUBECL_CACHE:-$pack/cubecl-cache}
  mkdir -p "$cache"
  cache=$(cd "$cache" && pwd)
  cat >cubecl.toml <<EOF
[autotune]
level = "${CUBECL_TUNING:-minimal}"
cache = { file = "$cache/autotune" }

[compilation]
cache = { file = "$cache/compilation" }
EOF
fi

# Atari needs the Python the binary links: unpack the packed one where the
# build had it (the binary's run path and the standard library's home).
if [ -f "$pack/python.tar.xz" ] && [ -f "$pack/python-prefix" ]; then
  prefix=$(cat "$pack/python-prefix")
  venv=/tmp/sebulba-device-venv
  if [ ! -d "$venv" ]; then
    stage=$(mktemp -d)
    xz -dc "$pack/python.tar.xz" | tar -C "$stage" -xf -
    if [ ! -e "$prefix/lib" ]; then
      mkdir -p "$(dirname "$prefix")"
      mv "$stage/prefix" "$prefix"
    fi
    mv "$stage/venv" "$venv"
  fi
  [ -d "$venv" ] && export VIRTUAL_ENV="$venv"
fi
steps=${STEPS-agree learner peer train}
step() { case " $steps " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

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
field() { sed -n "s/.*\"$2\": \"\?\([-0-9.eE+a-z]*\).*/\1/p" "$1" | head -n 1; }

say "device-check $(date -u +%FT%TZ) device $device dry_run $dry binary $bin (from $bin_from)"
"$bin" --version 2>/dev/null | tee -a "$summary" || true
if command -v nvidia-smi >/dev/null; then
  nvidia-smi -L | tee -a "$summary" || true
fi

say "== 1. agreement: fused CPU engine against burn on $device"
failed=0
# shellcheck disable=SC2086 # a list of names
for net in ${AGREE_NETS-mlp nature minatar}; do
  step agree || break
  net_flags "$net"
  # The MLP at 512 samples, as on the H100 (2026-11-27). A CNN at its first
  # benchmark size: the learner step that follows then meets the shapes
  # burn-cuda compiled and tuned here (seconds a shape, cold) warm.
  samples=512
  [ "$net" != mlp ] && samples=$(net_sizes "$net" | cut -d' ' -f1)
  [ $dry = 1 ] && samples=32
  # One epoch (4 or 8 minibatch steps): over more, these synthetic updates
  # amplify rounding until an engine nudged by 2.4e-7 parts from itself by
  # a tenth of the move (docs/experiments.md, 2026-11-27), and no comparison
  # can resolve anything finer.
  rc=0
  capped "$(budget "${STEP_CAP:-150}" "$train_min")" "$bin" bench agree "${common[@]}" "${flags[@]}" --set ppo.epochs=1 \
    --samples "$samples" --learner-devices "$device" --json "$out/agree-$net.json" \
    >"$out/agree-$net.log" 2>&1 || rc=$?
  if [ $rc = 0 ]; then
    verdict=agrees
  elif [ -f "$out/agree-$net.json" ]; then
    verdict=DISAGREES
  elif [ $rc = 124 ] || [ $rc = 137 ]; then
    verdict="TIMED OUT"
  else
    verdict="FAILED (exit $rc: $(tail -n 1 "$out/agree-$net.log"))"
  fi
  [ $rc = 0 ] || failed=1
  say "agree $net: $verdict (relative difference $(field "$out/agree-$net.json" relative_diff), tolerance $(field "$out/agree-$net.json" tolerance) for $(field "$out/agree-$net.json" precision) products, rounding alone $(field "$out/agree-$net.json" rounding_floor), TF32 rounding of the weights $(field "$out/agree-$net.json" tf32_floor))"
  # The device does not run at all: nothing after this would either, and
  # the machine's minutes are better kept for a second try.
  if [ $net = mlp ] && [ ! -f "$out/agree-$net.json" ] && [ $rc != 124 ] && [ $rc != 137 ]; then
    say "device-check: $device does not run (agree-mlp.log); stopping"
    exit 1
  fi
done

say "== 2. learner throughput on $device (sample-gradients/s)"
smi_pid=
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=timestamp,utilization.gpu,utilization.memory,memory.used \
    --format=csv -lms 500 >"$out/nvidia-smi.csv" 2>/dev/null &
  smi_pid=$!
fi
for net in mlp nature minatar; do
  step learner || break
  net_flags "$net"
  for samples in $(net_sizes "$net"); do
    json="$out/learner-$net-$samples.json"
    if capped "$(budget "${STEP_CAP:-150}" "$train_min")" "$bin" bench learner "${common[@]}" "${flags[@]}" --samples "$samples" \
      --updates "$updates" --learner-devices "$device" --json "$json" \
      >"$out/learner-$net-$samples.log" 2>&1; then
      say "learner $net $samples: $(field "$json" sample_grads_per_second) (engine $(sed -n 's/.*"engine": "\([a-z]*\)".*/\1/p' "$json"))"
    else
      say "learner $net $samples: FAILED (see learner-$net-$samples.log)"
      failed=1
    fi
  done
done
say "== 3. peer: PyTorch on $torch_device (sample-gradients/s)"
if ! step peer; then
  say "peer: skipped (STEPS)"
elif [ ! -f "$peers/torch_cnn_ppo_update.py" ]; then
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
      if capped "$(budget 60 "$train_min")" "$python" "$peers/torch_cnn_ppo_update.py" "${args[@]}" --actions 2 --updates "$updates" \
        --device "$torch_device" >"$out/torch-$net-$samples.json" 2>"$out/torch-$net-$samples.log"; then
        say "pytorch $net $samples: $(field "$out/torch-$net-$samples.json" samples_per_s)"
      else
        say "pytorch $net $samples: FAILED (see torch-$net-$samples.log)"
        failed=1
      fi
    done
  done
fi

say "== 4. training $train_env in local mode, learner devices auto"
train_s=$(budget 100000 20)
[ "$deadline" = 0 ] && train_s=600
if ! step train; then
  say "train: skipped (STEPS)"
elif [ "$train_s" -lt 30 ]; then
  say "train: only ${train_s}s left; skipped"
  failed=1
else
  # SIGINT at the deadline: the run stops as on Ctrl-C, its files whole.
  rc=0
  # shellcheck disable=SC2086 # TRAIN_SETS is a list of flags
  timeout -s INT -k 30 "$train_s" "$bin" local --env "$train_env" --seed 1 --learner-devices auto \
    --run-dir "$out/train" --set learner.final_eval_timeout_secs=5 $train_sets \
    >"$out/train.log" 2>&1 || rc=$?
  updates_done=$(grep -c '"update"' "$out/train/metrics.jsonl" 2>/dev/null || true)
  say "train: exit $rc after ${train_s}s at most, ${updates_done:-0} updates; last progress: $(grep -a ' progress' "$out/train.log" | tail -n 1 | sed 's/.*progress/progress/')"
  say "train: $("$python" -c 'import json, sys; s = json.load(open(sys.argv[1])); print("learner devices", s["learner_devices"], "(" + s["device_choice"] + "), engine", s["engine"], "env steps", s["env_steps"], "steps/s", round(s["steps_per_second"]))' "$out/train/summary.json" 2>&1 | tail -n 1)"
  if [ ! -s "$out/train/metrics.jsonl" ]; then
    say "train: FAILED (no metrics; see train.log)"
    failed=1
  fi
fi
[ -n "$smi_pid" ] && kill "$smi_pid" 2>/dev/null || true

if [ $dry = 0 ] && [ -d "$cache" ]; then
  tar -C "$(dirname "$cache")" -czf "$out/cubecl-cache.tgz" "$(basename "$cache")" || true
fi

if [ $failed = 1 ]; then
  say "device-check: FAILED"
  exit 1
fi
say "device-check: done"
