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
# Run from the repository root:
#   bash scripts/demo.sh [--keep] [--protocol grpc]
#   bash scripts/demo.sh --prometheus
# --keep: leave VictoriaMetrics running afterwards, with a page on loopback that
#         draws the Grafana dashboard's panels (dashboards/nemolens.json) from
#         it (scripts/demo/viewer.py); both URLs and how to stop them are printed.
# --protocol grpc: both export over OTLP/gRPC, to a receiver that hands the
#         requests on to VictoriaMetrics as a collector would
#         (scripts/demo/grpc_relay.py); the tables are the same.
# --prometheus: no OTLP and no VictoriaMetrics: the server and the client
#         each run under nemolens-run --prometheus, whose endpoint a private
#         Prometheus scrapes every second, and the same tables are read from
#         it under Prometheus' names (report.py --prometheus). The client is
#         kept alive until the report is done, since its endpoint ends with it.
#         Goes with neither --protocol (nothing is pushed) nor --keep (the
#         dashboard's queries name the series as the shim does, dots
#         included, which Prometheus' translated names are not).
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
PROTOCOL_SET=0
PROM=0
usage() {
	echo "usage: bash scripts/demo.sh [--keep] [--protocol http/protobuf|grpc]" >&2
	echo "       bash scripts/demo.sh --prometheus" >&2
	[ -z "${1:-}" ] || echo "$1" >&2
	exit 2
}
while [ $# -gt 0 ]; do
	case "$1" in
	--keep) KEEP=1 ;;
	--protocol) [ $# -ge 2 ] || usage; PROTOCOL=$2; PROTOCOL_SET=1; shift ;;
	--protocol=*) PROTOCOL=${1#--protocol=}; PROTOCOL_SET=1 ;;
	--prometheus) PROM=1 ;;
	*) usage ;;
	esac
	shift
done
case "$PROTOCOL" in http/protobuf|grpc) ;; *) usage ;; esac
if [ "$PROM" -eq 1 ] && [ "$PROTOCOL_SET" -eq 1 ]; then
	usage "--prometheus sends no OTLP: it does not go with --protocol"
fi
if [ "$PROM" -eq 1 ] && [ "$KEEP" -eq 1 ]; then
	usage "--keep does not go with --prometheus: the dashboard's page queries the shim's own names
(dots included, as VictoriaMetrics keeps them), which are not Prometheus' names"
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/nemolens-demo.XXXXXX")
SERVER_PID=""
CLIENT_PID=""
RELAY_PID=""
PROM_PID=""
PROM_BIN=/opt/nemolens-deps/prometheus/usr/bin/prometheus
source "$ROOT/scripts/victoria.sh"

# Ends one process the demo started: TERM, then KILL after 5 s.
stop_pid() {
	kill -0 "$1" 2>/dev/null || { wait "$1" 2>/dev/null || true; return 0; }
	kill -TERM "$1" 2>/dev/null || true
	for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[ -z "$SERVER_PID" ] || stop_pid "$SERVER_PID"
	[ -z "$CLIENT_PID" ] || stop_pid "$CLIENT_PID"
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
	# Its data directory is in $WORK.
	[ -z "$PROM_PID" ] || stop_pid "$PROM_PID"
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
TARGETS=(nemolens_preload)
[ "$PROM" -eq 0 ] || TARGETS+=(nemolens-run)
{ cmake -S . -B build -DCMAKE_BUILD_TYPE=Release &&
  cmake --build build -j2 --target "${TARGETS[@]}"; } >"$WORK/build.log" 2>&1 ||
	fail "build failed" "$WORK/build.log"
SO="$ROOT/build/libnemolens_preload.so"
LAUNCHER="$ROOT/build/nemolens-run"
[ -f "$SO" ] || fail "$SO was not built"
step build "ok ($SO)"

free_port() {
	"$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# 2. VictoriaMetrics, or Prometheus scraping the two launchers' endpoints
# How each side runs: under plain LD_PRELOAD exporting over OTLP (SHIM_ENV),
# or under nemolens-run serving its tree to Prometheus (the *_RUN prefixes).
SERVER_RUN=()
CLIENT_RUN=()
if [ "$PROM" -eq 1 ]; then
	[ -x "$PROM_BIN" ] || fail "$PROM_BIN not found (scripts/setup-deps.sh installs it)"
	P_SERVER_SCRAPE=$(free_port)
	P_CLIENT_SCRAPE=$(free_port)
	P_PROM=$(free_port)
	PROM_URL="http://127.0.0.1:$P_PROM"
	mkdir "$WORK/prometheus"
	# honor_labels: the job and instance of each sample are its process's
	# service.name and service.instance.id, not the target's.
	cat >"$WORK/prometheus/prometheus.yml" <<-EOF
	global:
	  scrape_interval: 1s
	  scrape_timeout: 1s
	scrape_configs:
	  - job_name: nemolens
	    honor_labels: true
	    static_configs:
	      - targets: ['127.0.0.1:$P_SERVER_SCRAPE', '127.0.0.1:$P_CLIENT_SCRAPE']
	EOF
	"$PROM_BIN" --config.file "$WORK/prometheus/prometheus.yml" --storage.tsdb.path "$WORK/prometheus/data" \
		--web.listen-address "127.0.0.1:$P_PROM" --log.level warn >"$WORK/prometheus/log" 2>&1 &
	PROM_PID=$!
	for _ in $(seq 150); do
		curl -fsS -m 2 "$PROM_URL/-/ready" >/dev/null 2>&1 && break
		kill -0 "$PROM_PID" 2>/dev/null || fail "Prometheus exited" "$WORK/prometheus/log"
		sleep 0.2
	done
	curl -fsS -m 2 "$PROM_URL/-/ready" >/dev/null 2>&1 || fail "Prometheus did not start" "$WORK/prometheus/log"
	step prometheus "$PROM_URL (pid $PROM_PID), scraping the servers' :$P_SERVER_SCRAPE and the client's :$P_CLIENT_SCRAPE every 1 s"
	SHIM_ENV=(OTEL_METRICS_EXPORTER=prometheus)
	SERVER_RUN=("$LAUNCHER" --prometheus="127.0.0.1:$P_SERVER_SCRAPE")
	CLIENT_RUN=("$LAUNCHER" --prometheus="127.0.0.1:$P_CLIENT_SCRAPE")
	STORE=(--prometheus "$PROM_URL")
	HOW="scraped every 1 s (nemolens-run --prometheus)"
else
	vm_start || fail "VictoriaMetrics did not start"
	step victoria "$VM_URL (pid $VM_PID), OTLP at /opentelemetry/v1/metrics"
	SHIM_ENV=(LD_PRELOAD="$SO" OTEL_EXPORTER_OTLP_METRICS_ENDPOINT="$VM_OTLP_URL")
	STORE=(--vm "$VM_URL")
	HOW="export every 1000 ms ($PROTOCOL)"
fi

# How the shim exports over OTLP: straight to VictoriaMetrics over OTLP/HTTP,
# or over OTLP/gRPC to the relay in front of it.
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
	SHIM_ENV=(LD_PRELOAD="$SO" OTEL_EXPORTER_OTLP_PROTOCOL=grpc OTEL_EXPORTER_OTLP_ENDPOINT="$RELAY")
	step relay "OTLP/gRPC at $RELAY (pid $RELAY_PID), handed on to VictoriaMetrics"
fi

# 3. servers: uvicorn/FastAPI on two ports, plus a refused port and a full listener
env "${SHIM_ENV[@]}" \
	OTEL_METRIC_EXPORT_INTERVAL=1000 \
	OTEL_SERVICE_NAME=demo-servers NEMOLENS_MEMORY_PROFILING=true \
	"${SERVER_RUN[@]}" "$PY" scripts/demo/server.py --ports 2 --latency-ms 2,30 --full --refused \
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
step "" "+ $GHOST to ghost, + $SLOW to slow (connect timeout ${CONNECT_TIMEOUT} s); $HOW"
# Kept for the panels page: two more exports give every series the two
# samples rate() needs.
LINGER=()
[ "$KEEP" -eq 1 ] && LINGER=(--linger 2.2)
CLIENT=(env "${SHIM_ENV[@]}"
	OTEL_METRIC_EXPORT_INTERVAL=1000
	OTEL_SERVICE_NAME=demo-client
	NEMOLENS_DESTINATIONS="policy=127.0.0.1:$P_POLICY,judge=127.0.0.1:$P_JUDGE,ghost=127.0.0.1:$P_GHOST,slow=127.0.0.1:$P_SLOW"
	"${CLIENT_RUN[@]}")
CLIENT_ARGS=(
	--target "policy=http://127.0.0.1:$P_POLICY/v1/work"
	--target "judge=http://127.0.0.1:$P_JUDGE/v1/work"
	--target "agent=http://127.0.0.1:$P_POLICY/run" --post agent
	--target "model=http://127.0.0.1:$P_POLICY/v1/chat/completions" --chat model
	--target "resources=http://127.0.0.1:$P_JUDGE/verify" --post resources
	--requests "$REQUESTS" --limit "$LIMIT" --close-ratio "$CLOSE_RATIO"
	--extra "ghost=http://127.0.0.1:$P_GHOST/,$GHOST" --extra "slow=http://127.0.0.1:$P_SLOW/,$SLOW"
	--connect-timeout "$CONNECT_TIMEOUT")
t0=$(date +%s.%N)
rc=0
if [ "$PROM" -eq 1 ]; then
	# The client's endpoint ends with it, and Prometheus marks the series of
	# a target it can no longer scrape as stale: the client holds on after
	# its workload until the report has read its values from Prometheus.
	"${CLIENT[@]}" "$PY" scripts/demo/client.py "${CLIENT_ARGS[@]}" --hold "$WORK/client.stop" \
		>"$WORK/client.json" 2>"$WORK/client.log" &
	CLIENT_PID=$!
	# Its workload is done when its one JSON line is complete, while it holds.
	done_line() { [ -s "$WORK/client.json" ] && [ -z "$(tail -c 1 "$WORK/client.json")" ]; }
	for _ in $(seq 1200); do
		done_line && break
		kill -0 "$CLIENT_PID" 2>/dev/null || break
		sleep 0.1
	done
	if ! kill -0 "$CLIENT_PID" 2>/dev/null; then
		wait "$CLIENT_PID" || rc=$?
		CLIENT_PID=""
		[ "$rc" -ne 0 ] || rc=1   # ended without holding: its error is in client.json
	elif ! done_line; then
		fail "client did not finish within 120 s" "$WORK/client.log"
	fi
else
	"${CLIENT[@]}" timeout 120 "$PY" scripts/demo/client.py "${CLIENT_ARGS[@]}" "${LINGER[@]}" \
		>"$WORK/client.json" 2>"$WORK/client.log" || rc=$?
fi
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

# 5. ground truth from the server, then what VictoriaMetrics (Prometheus) holds
ACCEPTED=$(curl -fsS -m 5 "http://127.0.0.1:$P_ADMIN/stats" | "$PY" -c '
import json, sys
s = json.load(sys.stdin)
print(json.dumps({"policy": s.get(sys.argv[1], 0), "judge": s.get(sys.argv[2], 0)}))' "$P_POLICY" "$P_JUDGE")
echo
"$PY" scripts/demo/report.py "${STORE[@]}" --dests policy,judge,ghost,slow \
	--accepted "$ACCEPTED" --expected "{\"ghost\": $GHOST, \"slow\": $SLOW}" --client "$WORK/client.json" \
	--pool-dests "policy=127.0.0.1:$P_POLICY,judge=127.0.0.1:$P_JUDGE,ghost=127.0.0.1:$P_GHOST,slow=127.0.0.1:$P_SLOW"

# The report has read everything: the client may end now, and must end well.
if [ -n "$CLIENT_PID" ]; then
	touch "$WORK/client.stop"
	for _ in $(seq 100); do kill -0 "$CLIENT_PID" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$CLIENT_PID" 2>/dev/null && fail "client did not end within 10 s of being told" "$WORK/client.log"
	rc=0
	wait "$CLIENT_PID" || rc=$?
	CLIENT_PID=""
	[ "$rc" -eq 0 ] || fail "client exited with $rc after the report" "$WORK/client.log"
fi

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
