#!/usr/bin/env bash
# The test suite in tiers. With no tier named, all of them in this order (what
# CI runs):
#   fast     every crate's unit tests, the crates' own integration tests
#            (envs/tests, core/tests, ...) and the repository checks
#            (tests/architecture.rs): no process started, no Docker; seconds
#            from a warm build
#   kernels  the unit tests again under every other instruction-set path this
#            CPU has (SEBULBA_KERNELS): the fused kernels and engine on each
#   process  the binary's end-to-end runs as processes (tests/*.rs, Docker
#            aside) and the examples (examples/*.rs: each trains and checks itself)
#   docker   the compose and Swarm clusters (tests/compose_*.rs, tests/swarm.rs)
# Usage: scripts/test.sh [fast|kernels|process|docker|all]... [-- cargo test args]
# Every tier builds with the same packages and features, so moving between
# tiers rebuilds nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

tiers=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  tiers+=("$1")
  shift
done
[ "${1:-}" = "--" ] && shift
extra=("$@")
[ ${#tiers[@]} -eq 0 ] && tiers=(all)

cargo_test() {
  cargo test --workspace --features python --no-fail-fast "$@" ${extra[@]+"${extra[@]}"}
}

# Integration-test targets by tier, from the files.
root_tests() { for f in tests/*.rs; do basename "$f" .rs; done; }
docker_tests=()
for name in $(root_tests); do
  case "$name" in compose_* | swarm*) docker_tests+=("$name") ;; esac
done
repository_checks=(architecture)
is_one_of() {
  local name=$1
  shift
  for x in "$@"; do [ "$x" = "$name" ] && return 0; done
  return 1
}
targets() {
  local args=()
  for name in "$@"; do args+=(--test "$name"); done
  echo "${args[@]}"
}

fast() {
  local crate_tests=()
  for f in */tests/*.rs; do crate_tests+=("$(basename "$f" .rs)"); done
  echo "== fast tier: unit tests, ${crate_tests[*]}, ${repository_checks[*]}"
  # shellcheck disable=SC2046
  cargo_test --lib --bins $(targets "${crate_tests[@]}" "${repository_checks[@]}")
}

kernels() {
  local widest=scalar
  if grep -qw avx512f /proc/cpuinfo; then
    widest=avx512
  elif grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
    widest=avx2
  fi
  local paths=(scalar)
  [ "$widest" = avx512 ] && paths+=(avx2)
  echo "== kernels tier: the fast tier's unit tests under ${paths[*]} (the fast tier ran $widest)"
  for path in "${paths[@]}"; do
    echo "== SEBULBA_KERNELS=$path"
    SEBULBA_KERNELS=$path cargo_test --lib --bins
  done
}

process() {
  local names=()
  for name in $(root_tests); do
    is_one_of "$name" "${docker_tests[@]}" "${repository_checks[@]}" || names+=("$name")
  done
  echo "== process tier: ${names[*]}, the examples"
  # shellcheck disable=SC2046
  cargo_test $(targets "${names[@]}") --examples
}

docker() {
  echo "== docker tier: ${docker_tests[*]}"
  # shellcheck disable=SC2046
  cargo_test $(targets "${docker_tests[@]}")
}

for tier in "${tiers[@]}"; do
  case "$tier" in
    fast) fast ;;
    kernels) kernels ;;
    process) process ;;
    docker) docker ;;
    all) fast; kernels; process; docker ;;
    *) echo "unknown tier '$tier' (fast, kernels, process, docker, all)" >&2; exit 2 ;;
  esac
done
