#!/usr/bin/env bash
# Two hosts that are really apart, on one Linux machine: trains PPO and DQN on CartPole across two
# network namespaces joined only by a veth pair, and tears everything down.
#
#   namespace tfrl-demo-a (10.231.0.1): Ray head {"learner": 1}, the driver (hence the learner)
#   namespace tfrl-demo-b (10.231.0.2): Ray worker node {"rollout": 4, "replay": 1}, 2 CPUs:
#                                       the rollout workers and the replay server (token + TLS)
#
# Each namespace has its own loopback and ports, so nothing can reach the other side on
# 127.0.0.1 and a Ray already running on the machine is neither seen nor disturbed (each node
# keeps its files in a temp dir of its own; processes are stopped by id, never by `ray stop`,
# which would stop every Ray on the machine). The TLS key and token are read by the driver only.
#
# Run as root from the repository root:   sudo tools/cluster_demo.sh
# Environment: PYTHON (default: python3 with tfrl installed), DEMO_SUBNET (default 10.231.0),
# DEMO_MAX_SECONDS (per algorithm, default 900), DEMO_ALGOS (default "cartpole-ppo cartpole-dqn").
set -euo pipefail

PYTHON=${PYTHON:-$(command -v python3)}
SUBNET=${DEMO_SUBNET:-10.231.0}
MAX_SECONDS=${DEMO_MAX_SECONDS:-900}
ALGOS=${DEMO_ALGOS:-cartpole-ppo cartpole-dqn}
NS_A=tfrl-demo-a
NS_B=tfrl-demo-b
VETH_A=tfrl-demo-va
VETH_B=tfrl-demo-vb
IP_A=$SUBNET.1
IP_B=$SUBNET.2
GCS_PORT=6390
REPO=$(cd "$(dirname "$0")/.." && pwd)
# every node runs this checkout's tfrl (on a real cluster: the same tfrl installed on each host)
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"

die() { echo "cluster_demo: $*" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || die "run as root (network namespaces need it): sudo $0"
command -v ip >/dev/null || die "the ip command (iproute2) is missing"
command -v openssl >/dev/null || die "openssl is missing (it makes the demo's TLS certificate)"
(cd / && "$PYTHON" -c "import ray, tfrl") 2>/dev/null \
  || die "$PYTHON cannot import ray and tfrl; install tfrl (pip install -e .) or set PYTHON"
for ns in "$NS_A" "$NS_B"; do
  ! ip netns list | grep -qw "$ns" || die "namespace $ns exists (an earlier run still going?); " \
    "stop it with: ip netns pids $ns | xargs -r kill; ip netns del $ns"
done

WORK=$(mktemp -d /tmp/tfrl-demo.XXXXXX)
chmod 700 "$WORK"

stop_namespace() {  # stops what runs in namespace $1 (all of it was started here), then deletes it
  local ns=$1 pids
  ip netns list | grep -qw "$ns" || return 0
  pids=$(ip netns pids "$ns" || true)
  if [ -n "$pids" ]; then
    kill $pids 2>/dev/null || true
    for _ in $(seq 20); do
      pids=$(ip netns pids "$ns" || true)
      [ -z "$pids" ] && break
      sleep 0.5
    done
    if [ -n "$pids" ]; then
      kill -9 $pids 2>/dev/null || true
      sleep 1
    fi
  fi
  ip netns del "$ns" 2>/dev/null || true
}

teardown() {
  local status=$?
  set +e
  echo "cluster_demo: tearing down"
  stop_namespace "$NS_B"
  stop_namespace "$NS_A"
  ip link del "$VETH_A" 2>/dev/null  # gone with its namespace; here in case setup stopped early
  rm -rf "$WORK"
  exit $status
}
trap teardown EXIT
trap 'exit 130' INT TERM

# --- the network: two namespaces, a veth pair, nothing else ---------------------------------
ip netns add "$NS_A"
ip netns add "$NS_B"
ip link add "$VETH_A" type veth peer name "$VETH_B"
ip link set "$VETH_A" netns "$NS_A"
ip link set "$VETH_B" netns "$NS_B"
ip -n "$NS_A" addr add "$IP_A/24" dev "$VETH_A"
ip -n "$NS_B" addr add "$IP_B/24" dev "$VETH_B"
for pair in "$NS_A:$VETH_A" "$NS_B:$VETH_B"; do
  ip -n "${pair%%:*}" link set lo up
  ip -n "${pair%%:*}" link set "${pair#*:}" up
  # Ray finds a process's own address by routing towards a public address; a default route over
  # the veth lets it find the namespace's one (nothing is forwarded beyond the other namespace).
  ip -n "${pair%%:*}" route add default dev "${pair#*:}"
done

# --- Ray: a head in A, a worker node in B -------------------------------------------------------
# Ray's own token authentication, on for every node and the driver, with a token of this
# cluster's (a head would otherwise turn it on from ~/.ray/auth_token and refuse the worker node).
RAY_TOKEN=$(openssl rand -hex 32)
in_ns() {  # runs a command in namespace $1 with this cluster's Ray environment
  local ns=$1; shift
  ip netns exec "$ns" env -u RAY_ADDRESS -u RAY_AUTH_TOKEN_PATH RAY_AUTH_MODE=token \
    RAY_AUTH_TOKEN="$RAY_TOKEN" RAY_USAGE_STATS_ENABLED=0 PYTHONUNBUFFERED=1 "$@"
}
# Each namespace has a port space of its own, so these fixed ports meet no other Ray; set them
# all so that Ray's traffic between the nodes is on ports named here (what a firewall would open;
# the replay server's port, picked freely on its node, comes on top).
RAY_PORTS=(--node-manager-port 6391 --object-manager-port 6392 --min-worker-port 10002
           --max-worker-port 10200 --metrics-export-port 6393 --dashboard-agent-grpc-port 6394
           --dashboard-agent-listen-port 6395 --runtime-env-agent-port 6396)
RAY="$(dirname "$PYTHON")/ray"
[ -x "$RAY" ] || RAY=$(command -v ray)
in_ns "$NS_A" "$RAY" start --head --node-ip-address "$IP_A" --port "$GCS_PORT" \
  --ray-client-server-port 10001 "${RAY_PORTS[@]}" --include-dashboard false \
  --num-cpus 0 --resources '{"learner": 1}' --object-store-memory 200000000 \
  --temp-dir "$WORK/ray-a" --disable-usage-stats > "$WORK/ray-a.log" 2>&1 \
  || { cat "$WORK/ray-a.log"; die "the Ray head did not start"; }
in_ns "$NS_B" "$RAY" start --address "$IP_A:$GCS_PORT" --node-ip-address "$IP_B" \
  "${RAY_PORTS[@]}" --num-cpus 2 --resources '{"rollout": 4, "replay": 1}' \
  --object-store-memory 200000000 --temp-dir "$WORK/ray-b" --disable-usage-stats \
  > "$WORK/ray-b.log" 2>&1 || { cat "$WORK/ray-b.log"; die "the Ray worker node did not start"; }
echo "cluster_demo: Ray head $IP_A:$GCS_PORT (namespace $NS_A), worker node $IP_B (namespace $NS_B)"

# --- credentials: an access token, and a self-signed certificate naming the replay node ------
# (made by the cluster examples' script, in the driver's namespace: it asks Ray which node
# offers the `replay` resource)
openssl rand -hex 32 > "$WORK/replay-token"
in_ns "$NS_A" env RAY_ADDRESS="$IP_A:$GCS_PORT" PYTHON="$PYTHON" \
  bash "$REPO/examples/cluster/replay_cert.sh" "$WORK" replay
openssl x509 -noout -ext subjectAltName -in "$WORK/replay-cert.pem" | grep -q "IP Address:$IP_B\b" \
  || die "the replay certificate does not name $IP_B"
chmod 600 "$WORK"/replay-*

# --- training: the driver in A ------------------------------------------------------------
failed=0
summaries=()
for example in $ALGOS; do
  echo "cluster_demo: training $example"
  log="$WORK/$example.log"
  set +e
  (cd "$REPO" && in_ns "$NS_A" "$PYTHON" tools/cluster_demo_train.py "$example" \
     --ray-address "$IP_A:$GCS_PORT" --worker-ip "$IP_B" --learner-ip "$IP_A" \
     --token-file "$WORK/replay-token" --certificate "$WORK/replay-cert.pem" \
     --private-key "$WORK/replay-key.pem" --max-seconds "$MAX_SECONDS") 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  set -e
  [ "$status" -eq 0 ] || failed=1
  summaries+=("$(grep '^cluster-demo algo=' "$log" || echo "cluster-demo $example: no result (exit $status)")")
done

echo "cluster_demo: $(date -u +%Y-%m-%dT%H:%M:%SZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%s\n' "${summaries[@]}"
[ "$failed" -eq 0 ] || die "a run missed its target or ran a component on the wrong node (above)"
echo "cluster_demo: OK"
