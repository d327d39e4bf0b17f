#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end demo: an aiohttp client runs under libnemolens_preload.so against
# a uvicorn/FastAPI server on two loopback ports (policy, judge), a refused port
# (ghost) and a listener whose accept queue is full (slow). The server runs
# under the shim too and answers NeMo Gym's /run and /verify besides /v1/work.
# Both export to a private VictoriaMetrics, and the demo prints what PromQL
# sees there: connections per destination, requests per route with latency
# percentiles and status mix, and the rollout/verify figures.
#
# Run from the repository root:  bash scripts/demo.sh [--keep] [--protocol grpc]
# --keep: leave VictoriaMetrics running afterwards, with a page on loopback that
#         draws the Grafana dashboard's panels (dashboards/nemolens.json) from
#         it (scripts/demo/viewer.py); both URLs and how to stop them are printed.
# --protocol grpc: both export over OTLP/gRPC, to a receiver that hands the
#         requests on to VictoriaMetrics as a collector would
#         (scripts/demo/grpc_relay.py); the tables are the same.
# Environment: DEMO_REQUESTS (200), DEMO_LIMIT (4), DEMO_CLOSE_RATIO (0.25),
#              DEMO_GHOST (6), DEMO_SLOW (3), DEMO_CONNECT_TIMEOUT (0.3 s).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PY=/usr/bin/python3
REQUESTS=${DEMO_REQUESTS:-200}
LIMIT=${DEMO_LIMIT:-4}
CLOSE_RATIO=${DEMO_CLOSE_RATIO:-0.25}
GHOST=${DEMO_GHOST:-6}
SLOW=${DEMO_SLOW:-3}
CONNECT_TIMEOUT=${DEMO_CONNECT_TIMEOUT:-0.3}

KEEP=0
PROTOCOL=http/protobuf
usage() { echo "usage: bash scripts/demo.sh [--keep] [--protocol http/protobuf|grpc]" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case "$1" in
	--keep) KEEP=1 ;;
	--protocol) [ $# -ge 2 ] || usage; PROTOCOL=$2; shift ;;
	--protocol=*) PROTOCOL=${1#--protocol=} ;;
	*) usage ;;
	esac
	shift
done
case "$PROTOCOL" in http/protobuf|grpc) ;; *) usage ;; esac

WORK=$(mktemp -d "${TMPDIR:-/tmp}/nemolens-demo.XXXXXX")
SERVER_PID=""
RELAY_PID=""
source "$ROOT/scripts/victoria.sh"

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
		kill -TERM "$SERVER_PID" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$SERVER_PID" 2>/dev/null || true
		wait "$SERVER_PID" 2>/dev/null || true
	fi
	if [ -n "$RELAY_PID" ]; then
		kill -TERM "$RELAY_PID" 2>/dev/null || true
		wait "$RELAY_PID" 2>/dev/null || true
	fi
	if [ "$KEEP" -eq 1 ] && [ "$rc" -eq 0 ] && [ -n "${VIEWER_URL:-}" ]; then
		echo
		echo "kept running: VictoriaMetrics $VM_URL (pid $VM_PID, data in $VM_DIR)"
		echo "  the dashboard's panels, drawn from it: $VIEWER_URL  (pid $VIEWER_PID)"
		echo "  stop with: kill $VIEWER_PID $VM_PID; rm -rf $VM_DIR"
	else
		[ -n "${VIEWER_PID:-}" ] && kill "$VIEWER_PID" 2>/dev/null
		vm_stop
	fi
	rm -rf "$WORK"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf '  %-10s %s\n' "$1" "$2"; }
fail() { # message, log file
	echo "demo: $1" >&2
	[ -n "${2:-}" ] && [ -s "$2" ] && tail -n 15 "$2" | sed 's/^/    /' >&2
	exit 1
}

echo "nemolens demo"

# 1. dependencies (idempotent) and build
bash scripts/setup-deps.sh >"$WORK/deps.log" 2>&1 || fail "scripts/setup-deps.sh failed" "$WORK/deps.log"
step deps "$(tail -n 1 "$WORK/deps.log")"
{ cmake -S . -B build -DCMAKE_BUILD_TYPE=Release &&
  cmake --build build -j2 --target nemolens_preload; } >"$WORK/build.log" 2>&1 ||
	fail "build failed" "$WORK/build.log"
SO="$ROOT/build/libnemolens_preload.so"
[ -f "$SO" ] || fail "$SO was not built"
step build "ok ($SO)"

# 2. VictoriaMetrics
vm_start || fail "VictoriaMetrics did not start"
step victoria "$VM_URL (pid $VM_PID), OTLP at /opentelemetry/v1/metrics"

# How the shim exports: straight to VictoriaMetrics over OTLP/HTTP, or over
# OTLP/gRPC to the relay in front of it.
EXPORT=(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT="$VM_OTLP_URL")
if [ "$PROTOCOL" = grpc ]; then
	PYTHONPATH=/opt/nemolens-deps/usr/lib/python3/dist-packages "$PY" scripts/demo/grpc_relay.py \
		--to "$VM_OTLP_URL" >"$WORK/relay.json" 2>"$WORK/relay.log" &
	RELAY_PID=$!
	for _ in $(seq 100); do
		[ -s "$WORK/relay.json" ] && break
		kill -0 "$RELAY_PID" 2>/dev/null || fail "the gRPC relay exited" "$WORK/relay.log"
		sleep 0.1
	done
	RELAY=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["endpoint"])' "$WORK/relay.json") ||
		fail "the gRPC relay did not start" "$WORK/relay.log"
	EXPORT=(OTEL_EXPORTER_OTLP_PROTOCOL=grpc OTEL_EXPORTER_OTLP_ENDPOINT="$RELAY")
	step relay "OTLP/gRPC at $RELAY (pid $RELAY_PID), handed on to VictoriaMetrics"
fi

# 3. servers: uvicorn/FastAPI on two ports, plus a refused port and a full listener
env LD_PRELOAD="$SO" \
	"${EXPORT[@]}" \
	OTEL_METRIC_EXPORT_INTERVAL=1000 \
	OTEL_SERVICE_NAME=demo-servers NEMOLENS_MEMORY_PROFILING=true \
	"$PY" scripts/demo/server.py --ports 2 --latency-ms 2,30 --full --refused \
	>"$WORK/server.json" 2>"$WORK/server.log" &
SERVER_PID=$!
for _ in $(seq 200); do
	[ -s "$WORK/server.json" ] && break
	kill -0 "$SERVER_PID" 2>/dev/null || fail "server exited" "$WORK/server.log"
	sleep 0.1
done
[ -s "$WORK/server.json" ] || fail "server did not start within 20 s" "$WORK/server.log"
read -r P_POLICY P_JUDGE P_ADMIN P_SLOW P_GHOST < <("$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(*d["ports"], d["admin"], d["full"], d["refused"])' "$WORK/server.json")
step servers "policy :$P_POLICY, judge :$P_JUDGE (uvicorn/FastAPI under the shim: /v1/work 2-30 ms, /run, /verify),"
step "" "ghost :$P_GHOST (refused), slow :$P_SLOW (accept queue full)"

# 4. the workload, under the shim
step workload "$REQUESTS requests round-robin (GET /v1/work on both, POST /run, POST /verify, POST /v1/chat/completions), aiohttp pool limit $LIMIT,"
step "" "${CLOSE_RATIO} of them 'Connection: close';"
step "" "+ $GHOST to ghost, + $SLOW to slow (connect timeout ${CONNECT_TIMEOUT} s); export every 1000 ms ($PROTOCOL)"
# Kept for the panels page: two more exports give every series the two
# samples rate() needs.
LINGER=()
[ "$KEEP" -eq 1 ] && LINGER=(--linger 2.2)
t0=$(date +%s.%N)
rc=0
env LD_PRELOAD="$SO" \
	"${EXPORT[@]}" \
	OTEL_METRIC_EXPORT_INTERVAL=1000 \
	OTEL_SERVICE_NAME=demo-client \
	NEMOLENS_DESTINATIONS="policy=127.0.0.1:$P_POLICY,judge=127.0.0.1:$P_JUDGE,ghost=127.0.0.1:$P_GHOST,slow=127.0.0.1:$P_SLOW" \
	timeout 120 "$PY" scripts/demo/client.py \
	--target "policy=http://127.0.0.1:$P_POLICY/v1/work" \
	--target "judge=http://127.0.0.1:$P_JUDGE/v1/work" \
	--target "agent=http://127.0.0.1:$P_POLICY/run" --post agent \
	--target "model=http://127.0.0.1:$P_POLICY/v1/chat/completions" --chat model \
	--target "resources=http://127.0.0.1:$P_JUDGE/verify" --post resources \
	--requests "$REQUESTS" --limit "$LIMIT" --close-ratio "$CLOSE_RATIO" \
	--extra "ghost=http://127.0.0.1:$P_GHOST/,$GHOST" --extra "slow=http://127.0.0.1:$P_SLOW/,$SLOW" \
	--connect-timeout "$CONNECT_TIMEOUT" "${LINGER[@]}" >"$WORK/client.json" 2>"$WORK/client.log" || rc=$?
t1=$(date +%s.%N)
[ "$rc" -eq 0 ] || fail "client exited with $rc: $(cat "$WORK/client.json")" "$WORK/client.log"
step client "$("$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
parts = [f"{k} {v} ok" for k, v in d["ok"].items()]
parts += [f"{k} {n} {e}" for k, errs in d["failed"].items() for e, n in errs.items()]
print(", ".join(parts) + f" in {float(sys.argv[2]):.1f} s")' "$WORK/client.json" "$(echo "$t1 - $t0" | bc 2>/dev/null || echo 0)")"
if [ -s "$WORK/client.log" ]; then
	step "" "client/shim stderr: $(head -c 300 "$WORK/client.log" | tr '\n' ' ')"
fi

# 5. ground truth from the server, then what VictoriaMetrics holds
ACCEPTED=$(curl -fsS -m 5 "http://127.0.0.1:$P_ADMIN/stats" | "$PY" -c '
import json, sys
s = json.load(sys.stdin)
print(json.dumps({"policy": s.get(sys.argv[1], 0), "judge": s.get(sys.argv[2], 0)}))' "$P_POLICY" "$P_JUDGE")
echo
"$PY" scripts/demo/report.py --vm "$VM_URL" --dests policy,judge,ghost,slow \
	--accepted "$ACCEPTED" --expected "{\"ghost\": $GHOST, \"slow\": $SLOW}" --client "$WORK/client.json" \
	--pool-dests "policy=127.0.0.1:$P_POLICY,judge=127.0.0.1:$P_JUDGE,ghost=127.0.0.1:$P_GHOST,slow=127.0.0.1:$P_SLOW"

# 6. --keep: the dashboard's panels in a browser, from this VictoriaMetrics
if [ "$KEEP" -eq 1 ]; then
	setsid "$PY" scripts/demo/viewer.py --vm "$VM_URL" >"$WORK/viewer.json" 2>/dev/null </dev/null &
	VIEWER_PID=$!
	for _ in $(seq 100); do
		[ -s "$WORK/viewer.json" ] && break
		sleep 0.1
	done
	VIEWER_URL=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["url"])' "$WORK/viewer.json") ||
		fail "the dashboard page did not start"
fi
