#!/usr/bin/env bash
# Makes a self-signed TLS certificate for the replay servers of a running Ray cluster: it names
# the address of every live node offering the `replay` resource (a TLS client checks the address
# it dials), so the trainer's replay_tls_certificate_file / replay_tls_private_key_file can serve
# TLS there. Run it where the driver runs (it reads both files and hands them to the servers),
# after the replay nodes are up, and again when one is replaced.
#
#   bash examples/cluster/replay_cert.sh OUT_DIR [RESOURCE]   -> OUT_DIR/replay-cert.pem, replay-key.pem
#
# It joins the cluster at RAY_ADDRESS, else the one started on this machine; needs openssl.
set -euo pipefail
OUT=${1:?usage: replay_cert.sh OUT_DIR [RESOURCE]}
RESOURCE=${2:-replay}
ADDRESSES=$("${PYTHON:-python}" - "$RESOURCE" <<'PY'
import sys

import ray

ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
found = sorted({node["NodeManagerAddress"] for node in ray.nodes()
                if node["Alive"] and node["Resources"].get(sys.argv[1])})
if not found:
    sys.exit(f"no live node of the cluster offers the {sys.argv[1]!r} resource yet")
print(" ".join(found))
PY
)
SAN=$(printf 'IP:%s,' $ADDRESSES)
mkdir -p "$OUT"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 365 \
  -subj "/CN=tfrl-replay" -addext "subjectAltName=${SAN%,}" \
  -keyout "$OUT/replay-key.pem" -out "$OUT/replay-cert.pem" 2>/dev/null
chmod 600 "$OUT/replay-key.pem"
echo "replay TLS certificate for $ADDRESSES: $OUT/replay-cert.pem (key: $OUT/replay-key.pem)"
