#!/usr/bin/env bash
# Validates the Kubernetes manifests in deploy/k8s offline (no cluster):
#
#  1. every resource file (each *.yaml here but kustomization.yaml) against the
#     Kubernetes JSON schemas with kubernetes-validate --strict (unknown fields
#     are errors; so is a resource it has no schema for, which the tool itself
#     only warns about);
#  2. the wiring the schemas cannot see: the certificate names in README.md's
#     `sebulba certs` command cover every Service (short, namespace-qualified
#     and cluster-local forms) and 127.0.0.1 for the probes, and every https
#     URL the pods use; each pod gets only the tokens its role needs and only
#     servers mount the server key; servers have gRPC-health probes; the
#     evaluator's seed is run.toml's; kustomization.yaml lists every manifest;
#  3. where kubectl (or kustomize) is on PATH: the kustomization rendered with
#     placeholder certificates (never the real ones), validated the same way,
#     and every Secret/ConfigMap/claim a pod references present in it.
#
#   python3 -m venv .k8s-venv && .k8s-venv/bin/pip install kubernetes-validate
#   KUBERNETES_VALIDATE=.k8s-venv/bin/kubernetes-validate deploy/k8s/validate.sh
#
# Env: KUBERNETES_VALIDATE (the executable; default $VIRTUAL_ENV/bin's, then
# PATH's), KUBERNETES_VERSIONS (space-separated, default 1.30.0).
# Exits non-zero on any failure.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
versions="${KUBERNETES_VERSIONS:-1.30.0}"

kv="${KUBERNETES_VALIDATE:-}"
if [ -z "$kv" ] && [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/kubernetes-validate" ]; then
  kv="$VIRTUAL_ENV/bin/kubernetes-validate"
fi
if [ -z "$kv" ]; then
  kv="$(command -v kubernetes-validate || true)"
fi
if [ -z "$kv" ] || [ ! -x "$kv" ]; then
  echo "validate.sh: kubernetes-validate not found: set KUBERNETES_VALIDATE or VIRTUAL_ENV" >&2
  echo "  (python3 -m venv VENV && VENV/bin/pip install kubernetes-validate)" >&2
  exit 2
fi
# A Python with PyYAML (a kubernetes-validate dependency): the tool's own first.
py=""
for cand in "$(dirname "$kv")/python3" "$(dirname "$kv")/python" python3; do
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import yaml' 2>/dev/null; then
    py="$cand"
    break
  fi
done
if [ -z "$py" ]; then
  echo "validate.sh: no Python with PyYAML (the one next to $kv lacks it)" >&2
  exit 2
fi

files=()
while IFS= read -r f; do files+=("$f"); done < <(
  find "$here" -maxdepth 1 -type f \( -name '*.yaml' -o -name '*.yml' \) \
    ! -name kustomization.yaml ! -name kustomization.yml | sort)
if [ "${#files[@]}" -eq 0 ]; then
  echo "validate.sh: no manifests in $here" >&2
  exit 1
fi

echo "== kubernetes-validate $("$kv" --version) --strict, Kubernetes ${versions}"
failed=0

# Runs kubernetes-validate on the given files; fails on its exit status, on any
# WARN/ERROR/FATAL line, and unless every document passed once per version.
schema_check() {
  local out rc=0 docs passed nver
  nver=$(wc -w <<<"$versions")
  docs=$("$py" -c '
import sys, yaml
print(sum(1 for f in sys.argv[1:] for d in yaml.safe_load_all(open(f)) if d))' "$@")
  local args=()
  for v in $versions; do args+=(-k "$v"); done
  out=$("$kv" --strict "${args[@]}" "$@" 2>&1) || rc=$?
  printf '%s\n' "$out" | sed "s|$here/||g; s|$tmp/||g"
  passed=$(grep -c '^INFO .* passed for resource ' <<<"$out" || true)
  if [ "$rc" -ne 0 ] || grep -qE '^(WARN|ERROR|FATAL)' <<<"$out" \
    || [ "$passed" -ne $((docs * nver)) ]; then
    echo "FAIL: schema validation ($passed of $((docs * nver)) document checks passed, exit $rc)"
    return 1
  fi
  echo "ok: $docs documents x $nver version(s)"
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

schema_check "${files[@]}" || failed=1

echo "== wiring: certificate names, tokens, probes, seed, kustomization"
"$py" - "$here" "$tmp/rendered.yaml" "${files[@]}" <<'PY' || failed=1
import os, re, sys, yaml

here, rendered, files = sys.argv[1], sys.argv[2], sys.argv[3:]
errors = []
def err(msg): errors.append(msg)

kust = yaml.safe_load(open(os.path.join(here, "kustomization.yaml")))
default_ns = kust.get("namespace", "default")
docs = []  # (file, doc)
for f in files:
    for d in yaml.safe_load_all(open(f)):
        if d:
            docs.append((os.path.basename(f), d))

# kustomization.yaml lists every manifest but the helpers applied by hand.
helpers = {"runs-copy.yaml"}
listed = set(kust.get("resources", []))
for r in sorted(listed):
    if not os.path.isfile(os.path.join(here, r)):
        err(f"kustomization.yaml lists {r}, which does not exist")
for f in files:
    b = os.path.basename(f)
    if b not in listed and b not in helpers:
        err(f"{b} is in neither kustomization.yaml's resources nor the helpers")

# The names in README.md's command line `sebulba certs --out deploy/k8s/certs --names a,b,c`.
readme = open(os.path.join(here, "README.md")).read().replace("\\\n", " ")
cmds = [l for l in readme.splitlines() if l.strip().startswith("sebulba certs ") and "--names" in l]
if len(cmds) != 1:
    err(f"README.md: expected one `sebulba certs ... --names` line, found {len(cmds)}")
    names = set()
else:
    m = re.search(r"--names[ =](\S+)", cmds[0])
    names = set(m.group(1).strip("'\"").split(",")) if m else set()
    out = re.search(r"--out[ =](\S+)", cmds[0])
    if not out or out.group(1).rstrip("/") != "deploy/k8s/certs":
        err("README.md: the certs command must write to deploy/k8s/certs (kustomization.yaml reads certs/)")
print(f"certificate names: {','.join(sorted(names))}")

services = {}
for f, d in docs:
    if d.get("kind") == "Service":
        n = d["metadata"]["name"]
        ns = d["metadata"].get("namespace", default_ns)
        if ns != default_ns:
            err(f"{f}: Service {n} in namespace {ns}, kustomization says {default_ns}")
        forms = [n, f"{n}.{ns}", f"{n}.{ns}.svc", f"{n}.{ns}.svc.cluster.local"]
        services[n] = forms
        missing = [x for x in forms if x not in names]
        if missing:
            err(f"{f}: Service {n}: certificate lacks {','.join(missing)}")
        else:
            print(f"Service {n}: {', '.join(forms)} covered")
for x in ("localhost", "127.0.0.1"):
    if x not in names:
        err(f"certificate lacks {x} (the probes connect to 127.0.0.1)")
print(f"services: {', '.join(sorted(services))}")

def pod_specs():
    for f, d in docs:
        spec = d.get("spec", {})
        if d.get("kind") == "Pod":
            yield f, d["metadata"]["name"], spec
        elif "template" in spec:
            yield f, d["metadata"]["name"], spec["template"]["spec"]

# Which tokens each role gets: param-server all, learner actor+learner,
# actor its own, evaluator the read-only one.
want_tokens = {
    "param-server": {"SEBULBA_ACTOR_TOKEN", "SEBULBA_LEARNER_TOKEN", "SEBULBA_READ_TOKEN"},
    "learner": {"SEBULBA_ACTOR_TOKEN", "SEBULBA_LEARNER_TOKEN"},
    "actor": {"SEBULBA_ACTOR_TOKEN"},
    "evaluator": {"SEBULBA_READ_TOKEN"},
}
health = ["/usr/local/bin/sebulba", "health", "--addr"]
roles_seen = set()
eval_seed = None
for f, wl, spec in pod_specs():
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        if c.get("image", "").split(":")[0].split("/")[-1] != "sebulba":
            continue
        role = (c.get("args") or [""])[0]
        roles_seen.add(role)
        where = f"{f}: {wl}/{c['name']}"
        env = {e["name"]: e for e in c.get("env", [])}
        if any("secretRef" in e for e in c.get("envFrom", [])):
            err(f"{where}: envFrom a Secret hands over every token; use secretKeyRef")
        tokens = {n for n in env if n.endswith("_TOKEN")}
        if role in want_tokens and tokens != want_tokens[role]:
            err(f"{where}: tokens {sorted(tokens)}, role {role} needs {sorted(want_tokens[role])}")
        for n in tokens:
            if "secretKeyRef" not in env[n].get("valueFrom", {}):
                err(f"{where}: {n} must come from a Secret")
        server = "SEBULBA_TLS_KEY" in env
        if "SEBULBA_TLS_CA" not in env:
            err(f"{where}: no SEBULBA_TLS_CA")
        for m in c.get("volumeMounts", []):
            v = vols.get(m["name"], {})
            if "secret" in v:
                keys = {i["key"] for i in v["secret"].get("items", [])} or {"<all keys>"}
                if not server and keys != {"ca.pem"}:
                    err(f"{where}: a client mounts {sorted(keys)} of {v['secret']['secretName']}; it needs ca.pem only")
        # Every https URL names a Service the certificate covers.
        for n, e in env.items():
            u = re.match(r"https?://([^:/]+)", str(e.get("value", "")))
            if not u:
                continue
            host = u.group(1)
            if not str(e["value"]).startswith("https://"):
                err(f"{where}: {n}={e['value']} is not TLS")
            if host not in names:
                err(f"{where}: {n}: host {host} is not in the certificate")
            if not any(host in forms for forms in services.values()):
                err(f"{where}: {n}: host {host} is no Service here")
        # Servers: gRPC health probes over TLS on their own port.
        grpc = [p["containerPort"] for p in c.get("ports", []) if p.get("name") == "grpc"]
        if server or grpc:
            probes = ["readinessProbe", "livenessProbe"] + (["startupProbe"] if "startupProbe" in c else [])
            for probe in probes:
                cmd = c.get(probe, {}).get("exec", {}).get("command", [])
                want = health + [f"127.0.0.1:{grpc[0]}"] if grpc else None
                if cmd != want:
                    err(f"{where}: {probe} should exec {want}, has {cmd}")
        if "SEBULBA_METRICS_ADDR" in env and not any(
                p.get("name") == "metrics" and p["containerPort"] == 9464 for p in c.get("ports", [])):
            err(f"{where}: no containerPort `metrics` 9464")
        if role == "evaluator":
            eval_seed = env.get("SEBULBA_SEED", {}).get("value")
for role in want_tokens:
    if role not in roles_seen:
        err(f"no container runs `sebulba {role}`")

# The evaluator's seed is the run's.
text = open(os.path.join(here, "run.toml")).read()
try:
    import tomllib
    run_seed = tomllib.loads(text).get("run", {}).get("seed")
except ModuleNotFoundError:  # Python < 3.11
    sec = re.search(r"^\[run\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    m = sec and re.search(r"^\s*seed\s*=\s*(\d+)", sec.group(1), re.M)
    run_seed = int(m.group(1)) if m else None
if run_seed is None or str(run_seed) != str(eval_seed):
    err(f"run.toml's run.seed ({run_seed}) and the evaluator's SEBULBA_SEED ({eval_seed}) differ")
else:
    print(f"seed: run.toml and evaluator agree ({run_seed})")

for e in errors:
    print("FAIL:", e)
if not errors:
    print("ok: wiring")
sys.exit(1 if errors else 0)
PY

# The kustomization as kubectl apply -k would send it, with placeholder
# certificates and tokens (their content is not validated, only their keys).
render=""
if command -v kubectl >/dev/null 2>&1; then
  render="kubectl kustomize"
elif command -v kustomize >/dev/null 2>&1; then
  render="kustomize build"
fi
if [ -z "$render" ]; then
  echo "== kustomization: SKIPPED (neither kubectl nor kustomize on PATH)"
else
  echo "== kustomization rendered with $render (placeholder certs)"
  mkdir -p "$tmp/k8s/certs"
  (cd "$here" && find . -maxdepth 1 -type f -exec cp {} "$tmp/k8s/" \;)
  for f in ca.pem server.pem server.key; do echo "placeholder" >"$tmp/k8s/certs/$f"; done
  printf 'SEBULBA_ACTOR_TOKEN=a\nSEBULBA_LEARNER_TOKEN=b\nSEBULBA_READ_TOKEN=c\n' >"$tmp/k8s/certs/tokens.env"
  if $render "$tmp/k8s" >"$tmp/rendered.yaml"; then
    schema_check "$tmp/rendered.yaml" || failed=1
    "$py" - "$tmp/rendered.yaml" <<'PY' || failed=1
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
have = {(d["kind"], d["metadata"]["name"]): d for d in docs}
errors = []
def need(kind, name, key, where):
    d = have.get((kind, name))
    if d is None:
        errors.append(f"{where}: {kind} {name} is not in the rendered output")
    elif key is not None and key not in d.get("data", {}):
        errors.append(f"{where}: {kind} {name} has no key {key}")
for d in docs:
    spec = d.get("spec", {})
    spec = spec.get("template", {}).get("spec") if "template" in spec else (spec if d["kind"] == "Pod" else None)
    if not spec:
        continue
    if d["metadata"].get("namespace") != "sebulba":
        errors.append(f"{d['kind']} {d['metadata']['name']}: namespace {d['metadata'].get('namespace')}")
    where = f"{d['kind']}/{d['metadata']['name']}"
    for v in spec.get("volumes", []):
        if "secret" in v:
            for i in v["secret"].get("items", [{"key": None}]):
                need("Secret", v["secret"]["secretName"], i["key"], where)
        if "configMap" in v:
            for i in v["configMap"].get("items", [{"key": None}]):
                need("ConfigMap", v["configMap"]["name"], i["key"], where)
        if "persistentVolumeClaim" in v:
            need("PersistentVolumeClaim", v["persistentVolumeClaim"]["claimName"], None, where)
    for c in spec.get("containers", []):
        for e in c.get("env", []):
            ref = e.get("valueFrom", {})
            if "secretKeyRef" in ref:
                need("Secret", ref["secretKeyRef"]["name"], ref["secretKeyRef"]["key"], where)
            if "configMapKeyRef" in ref:
                need("ConfigMap", ref["configMapKeyRef"]["name"], ref["configMapKeyRef"]["key"], where)
for e in errors:
    print("FAIL:", e)
print("ok: every Secret, ConfigMap and claim referenced is rendered" if not errors else "")
sys.exit(1 if errors else 0)
PY
  else
    echo "FAIL: $render"
    failed=1
  fi
fi

if [ "$failed" -ne 0 ]; then
  echo "== deploy/k8s: INVALID"
  exit 1
fi
echo "== deploy/k8s: valid"
