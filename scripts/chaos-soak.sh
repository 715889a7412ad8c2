#!/usr/bin/env bash
# The chaos soak (tests/compose_chaos.rs) for a chosen time: a compose cluster
# trains CartPole while random faults hit every role (learner, param-server,
# actors, evaluator; kills, stops, scaling), then the run must finish with
# nothing lost. CI runs it for two minutes.
# Usage: scripts/chaos-soak.sh MINUTES [SEED]    (Docker with Compose needed)
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:?usage: scripts/chaos-soak.sh MINUTES [SEED]}
seed=${2:-1}
case "$minutes$seed" in *[!0-9]*) echo "MINUTES and SEED are whole numbers" >&2; exit 2 ;; esac
export SEBULBA_CHAOS_SECS=$((minutes * 60)) SEBULBA_CHAOS_SEED=$seed
exec cargo test --workspace --features python --test compose_chaos -- --nocapture
