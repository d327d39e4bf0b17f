# SPDX-License-Identifier: Apache-2.0
# Helpers to run a private, throw-away VictoriaMetrics on loopback.
# Source this file, then:
#   vm_start     starts it on a free 127.0.0.1 port with a temporary data dir;
#                sets VM_URL (http://127.0.0.1:PORT), VM_OTLP_URL (its OTLP/HTTP
#                metrics endpoint), VM_PID, VM_DIR; waits (bounded) for /health.
#   vm_stop      stops it by pid (TERM, then KILL after 10 s) and removes VM_DIR.
#   vm_query Q   prints the raw JSON answer of the PromQL instant query Q.
# Environment: VM_BIN (default /opt/nemolens-deps/usr/bin/victoria-metrics),
#              VM_START_TIMEOUT seconds (default 30).

VM_BIN=${VM_BIN:-/opt/nemolens-deps/usr/bin/victoria-metrics}

_vm_free_port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

vm_start() {
	if [ -n "${VM_PID:-}" ] && kill -0 "$VM_PID" 2>/dev/null; then
		return 0
	fi
	if [ ! -x "$VM_BIN" ]; then
		echo "vm_start: $VM_BIN not found (run scripts/setup-deps.sh)" >&2
		return 1
	fi
	VM_DIR=$(mktemp -d "${TMPDIR:-/tmp}/nemolens-vm.XXXXXX")
	local port tries=0 deadline
	while :; do
		port=$(_vm_free_port)
		"$VM_BIN" -storageDataPath="$VM_DIR/data" -httpListenAddr="127.0.0.1:$port" \
			-retentionPeriod=1d -search.latencyOffset=0s -search.disableCache \
			-loggerLevel=ERROR >"$VM_DIR/vm.log" 2>&1 &
		VM_PID=$!
		VM_URL="http://127.0.0.1:$port"
		VM_OTLP_URL="$VM_URL/opentelemetry/v1/metrics"
		deadline=$((SECONDS + ${VM_START_TIMEOUT:-30}))
		while ((SECONDS < deadline)); do
			if ! kill -0 "$VM_PID" 2>/dev/null; then
				break   # exited (port taken in between?): retry on another port
			fi
			if curl -fsS -m 2 "$VM_URL/health" >/dev/null 2>&1; then
				export VM_URL VM_OTLP_URL VM_PID VM_DIR
				return 0
			fi
			sleep 0.2
		done
		kill "$VM_PID" 2>/dev/null; wait "$VM_PID" 2>/dev/null
		tries=$((tries + 1))
		if ((tries >= 3)); then
			echo "vm_start: VictoriaMetrics did not become healthy; last log lines:" >&2
			tail -n 5 "$VM_DIR/vm.log" >&2
			rm -rf "$VM_DIR"
			unset VM_PID VM_URL VM_OTLP_URL VM_DIR
			return 1
		fi
	done
}

vm_stop() {
	if [ -n "${VM_PID:-}" ]; then
		if kill -0 "$VM_PID" 2>/dev/null; then
			kill -TERM "$VM_PID" 2>/dev/null
			local i
			for i in $(seq 100); do
				kill -0 "$VM_PID" 2>/dev/null || break
				sleep 0.1
			done
			kill -0 "$VM_PID" 2>/dev/null && kill -KILL "$VM_PID" 2>/dev/null
		fi
		wait "$VM_PID" 2>/dev/null || true
	fi
	if [ -n "${VM_DIR:-}" ] && [ -d "$VM_DIR" ]; then
		rm -rf "$VM_DIR"
	fi
	unset VM_PID VM_URL VM_OTLP_URL VM_DIR
	return 0
}

vm_query() {
	curl -fsS -m 10 --get "$VM_URL/api/v1/query" --data-urlencode "query=$1"
}
