#!/usr/bin/env bash
# Checks deploy/k8s/ against compose.yaml: both parse as YAML, and
# the k8s manifests use the same images (repository), the same listen ports,
# the same number of lock-server replicas, and a bench Job with
# --runtime external naming every replica. And the Prometheus checks (issue
# 24): compose's `prometheus` service mounts deploy/prometheus/ and loads its
# rules, the k8s ConfigMap deploy/k8s/prometheus-rules.yaml carries exactly
# deploy/prometheus/fencepost-rules.yaml, and, when promtool is installed,
# `promtool check config` and `promtool check rules` accept them.
# Exits 1 naming what differs.
# Needs python3 with PyYAML (Debian: python3-yaml) for the parse.
#
#   scripts/check-deploy.sh
#   scripts/check-deploy.sh --write-rules-configmap   # rewrite the ConfigMap from the rules file
set -euo pipefail
cd "$(dirname "$0")/.."
compose=compose.yaml
k8s=deploy/k8s
prom=deploy/prometheus
rules_cm="$k8s/prometheus-rules.yaml"
fail=0
bad() { echo "check-deploy: $*" >&2; fail=1; }

# The ConfigMap is the rules file, indented under data: (no PyYAML needed).
write_rules_configmap() {
  {
    cat <<'HEAD'
# fencepost's production checks as a ConfigMap (docs/alerts.md): the
# data is deploy/prometheus/fencepost-rules.yaml, which `bench rules` writes.
# Do not edit: regenerate with scripts/check-deploy.sh --write-rules-configmap
# (scripts/check-deploy.sh fails when the two differ). Mount it into your
# Prometheus and list /etc/prometheus/rules/fencepost-rules.yaml in rule_files.
apiVersion: v1
kind: ConfigMap
metadata:
  name: fencepost-prometheus-rules
  labels:
    app.kubernetes.io/part-of: fencepost
data:
  fencepost-rules.yaml: |
HEAD
    sed 's/^/    /' "$prom/fencepost-rules.yaml"
  } >"$rules_cm"
}
if [ "${1:-}" = "--write-rules-configmap" ]; then
  write_rules_configmap
  echo "check-deploy: wrote $rules_cm"
  exit 0
fi

# 1. Every file parses (all documents of a multi-document file). The first
# python3 with PyYAML: the one on PATH (may be a pyenv build without it), then
# Debian's, where `apt-get install python3-yaml` puts it.
py=
for c in python3 /usr/bin/python3; do
  if "$c" -c 'import yaml' 2>/dev/null; then py=$c; break; fi
done
if [ -n "$py" ]; then
  for f in "$compose" "$k8s"/*.yaml; do
    "$py" - "$f" <<'PY' || bad "$f does not parse as YAML"
import sys, yaml
with open(sys.argv[1]) as fh:
    docs = [d for d in yaml.safe_load_all(fh) if d is not None]
assert docs, "empty"
PY
  done
else
  bad "python3 with PyYAML is needed to parse the manifests (apt-get install python3-yaml)"
fi

# Image repositories (tag and ${...} stripped) and listen ports.
repos() { grep -hE '^\s*image:' "$@" | sed -E 's/^\s*image:\s*//; s/:\$\{.*$//; s/["'\'']//g' | sed -E 's/:[^/]*$//' | sort -u; }
compose_repos=$(repos "$compose")
k8s_repos=$(repos "$k8s"/*.yaml)
for r in $k8s_repos; do
  grep -qx "$r" <<<"$compose_repos" || bad "image $r in $k8s is not in $compose ($(echo $compose_repos))"
done
for r in fencepost/lock-server fencepost/rail-stub fencepost/bench; do
  grep -qx "$r" <<<"$k8s_repos" || bad "$k8s has no $r image"
done
pg_compose=$(grep -E '^\s*image:\s*postgres' "$compose" | sed -E 's/^\s*image:\s*//' | head -n1)
pg_k8s=$(grep -hE '^\s*image:\s*postgres' "$k8s"/*.yaml | sed -E 's/^\s*image:\s*//' | head -n1)
[ "$pg_compose" = "$pg_k8s" ] || bad "PostgreSQL image: $compose has '$pg_compose', $k8s '$pg_k8s'"

# Ports: compose's LOCK_LISTEN / RAIL_LISTEN port = the k8s containerPort and LISTEN value.
port_of() { sed -E 's/.*:([0-9]+)\s*$/\1/'; }
lock_port=$(grep -E '^\s*LOCK_LISTEN:' "$compose" | head -n1 | port_of)
rail_port=$(grep -E '^\s*RAIL_LISTEN:' "$compose" | head -n1 | port_of)
[ -n "$lock_port" ] && [ -n "$rail_port" ] || bad "no LOCK_LISTEN/RAIL_LISTEN in $compose"
grep -qE "containerPort:\s*$lock_port\b" "$k8s/lock-server.yaml" || bad "lock-server.yaml: no containerPort $lock_port"
grep -qE "value:\s*0\.0\.0\.0:$lock_port\b" "$k8s/lock-server.yaml" || bad "lock-server.yaml: LOCK_LISTEN is not 0.0.0.0:$lock_port"
grep -qE "containerPort:\s*$rail_port\b" "$k8s/rail-stub.yaml" || bad "rail-stub.yaml: no containerPort $rail_port"
grep -qE "value:\s*0\.0\.0\.0:$rail_port\b" "$k8s/rail-stub.yaml" || bad "rail-stub.yaml: RAIL_LISTEN is not 0.0.0.0:$rail_port"

# Replicas: compose's lock-server-N services = the StatefulSet's replicas.
n_compose=$(grep -cE '^  lock-server-[0-9]+:' "$compose")
n_k8s=$(grep -E '^\s*replicas:' "$k8s/lock-server.yaml" | head -n1 | sed -E 's/[^0-9]//g')
[ "$n_compose" = "$n_k8s" ] || bad "lock-server replicas: $compose has $n_compose, lock-server.yaml $n_k8s"
[ "$n_compose" -ge 2 ] || bad "$compose has $n_compose lock-server replicas (want several)"

# The bench Job: --runtime external, every replica on the lock port, the rail port.
job="$k8s/bench-job.yaml"
grep -qE '^\s*- external\s*$' "$job" && grep -qE '^\s*- --runtime\s*$' "$job" || bad "$job: no --runtime external"
urls=$(grep -A1 -E '^\s*- --lock-url\s*$' "$job" | tail -n1 | sed -E 's/^\s*- //')
n_urls=$(tr ',' '\n' <<<"$urls" | grep -cE ":$lock_port$" || true)
[ "$n_urls" = "$n_k8s" ] || bad "$job: --lock-url names $n_urls replicas on port $lock_port, want $n_k8s ($urls)"
grep -A1 -E '^\s*- --rail-url\s*$' "$job" | tail -n1 | grep -qE ":$rail_port\s*$" || bad "$job: --rail-url not on port $rail_port"

# Prometheus: the compose service mounts deploy/prometheus and
# loads prometheus.yml, whose rule_files name the generated rules; the
# ConfigMap's data is that file byte for byte.
if [ -n "$py" ]; then
  "$py" - "$compose" "$prom" "$rules_cm" <<'PY' || fail=1
import sys, yaml
compose, prom, cm_path = sys.argv[1:]
def bad(msg):
    print(f"check-deploy: {msg}", file=sys.stderr)
    bad.failed = True
bad.failed = False
with open(compose) as fh:
    services = yaml.safe_load(fh).get("services", {})
p = services.get("prometheus")
if p is None:
    bad(f"{compose} has no prometheus service")
else:
    mounts = [v.split(":") for v in p.get("volumes", []) if isinstance(v, str)]
    target = next((m[1] for m in mounts if m[0] in (f"./{prom}", prom)), None)
    if target is None:
        bad(f"{compose}: the prometheus service does not mount ./{prom}")
    cmd = " ".join(p.get("command", []))
    if target and f"--config.file={target}/prometheus.yml" not in cmd:
        bad(f"{compose}: prometheus is not started with --config.file={target}/prometheus.yml")
with open(f"{prom}/prometheus.yml") as fh:
    cfg = yaml.safe_load(fh)
if "fencepost-rules.yaml" not in cfg.get("rule_files", []):
    bad(f"{prom}/prometheus.yml: rule_files does not list fencepost-rules.yaml")
with open(f"{prom}/fencepost-rules.yaml") as fh:
    rules = fh.read()
with open(cm_path) as fh:
    cm = yaml.safe_load(fh)
if cm.get("kind") != "ConfigMap" or cm.get("data", {}).get("fencepost-rules.yaml") != rules:
    bad(f"{cm_path}: data.fencepost-rules.yaml differs from {prom}/fencepost-rules.yaml "
        "(scripts/check-deploy.sh --write-rules-configmap)")
sys.exit(1 if bad.failed else 0)
PY
fi
grep -qE '^\s*-\s*prometheus-rules\.yaml\s*$' "$k8s/kustomization.yaml" || bad "$k8s/kustomization.yaml does not list prometheus-rules.yaml"
promtool=$(command -v promtool || true)
if [ -n "$promtool" ]; then
  "$promtool" check config "$prom/prometheus.yml" >/dev/null || bad "promtool check config $prom/prometheus.yml failed"
  "$promtool" check rules "$prom/fencepost-rules.yaml" "$prom/test-rules.yaml" >/dev/null || bad "promtool check rules failed"
elif [ "${CI:-}" = "true" ]; then
  bad "CI=true and no promtool (apt-get install prometheus)"
else
  echo "check-deploy: no promtool, skipping promtool check config/rules" >&2
fi

if [ "$fail" = 0 ]; then
  echo "check-deploy: ok ($n_k8s lock-server replicas on $lock_port, rail-stub on $rail_port, images: $(echo $k8s_repos); prometheus rules in compose and the ConfigMap)"
fi
exit "$fail"
