# CPU per request, sourced by scripts/bench (uses its helpers: row, check,
# stop_pid, wait_http, wait_line, free_port, ngx_start, cg_row, ...).
#
#   cpu_callgrind_rows   section 1: a connection's life; the HTTP pair and the
#                        connection's life again with the exporter on,
#                        exporting every second to the live collector
#   cpu_server_rows      section 3: the server's CPU time per request served,
#                        without and with the shim, alternating
#
# CPU per request is the server process's utime + stime (/proc/PID/stat, all
# its threads, the shim's exporter thread included) over a wrk run, divided
# by the requests wrk completed in it. The ratio is the median of the
# adjacent (without, with) pairs; the pairs' lowest and highest ratio are
# printed too, so that the noise of the run can be read off the row.

CPU_CONNS=8   # wrk connections: fewer than the throughput rows, so the server is not saturated into timeouts

cpu_callgrind_rows() {
	command -v valgrind >/dev/null || {
		na_row 1 "instr/call: connection's life (socket, connect, accept, 2 closes; no destination rule)" "valgrind missing"
		return
	}
	# An empty NEMOLENS_DESTINATIONS overrides the rule cg_instr names.
	cg_row conn_life "connection's life (socket, connect, accept, 2 closes; no destination rule)" 450 NEMOLENS_DESTINATIONS=
	[ -n "$OTLP_URL" ] || return
	local saved=("${SHIM_QUIET_ENV[@]}")
	SHIM_QUIET_ENV=("${SHIM_EXPORT_ENV[@]}")
	cg_row http_server "HTTP pair, server side, exporter on (exporting every second)" 1000 NEMOLENS_HTTP=server
	cg_row http_client "HTTP pair, client side, exporter on (exporting every second)" 1000 NEMOLENS_HTTP=client
	cg_row conn_life "connection's life, exporter on (exporting every second)" 450 NEMOLENS_DESTINATIONS=
	SHIM_QUIET_ENV=("${saved[@]}")
}

cpu_ticks() { # pid: utime + stime in clock ticks (the fields after the command's closing parenthesis)
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
	s=${s##*) }
	awk '{ print $12 + $13 }' <<<"$s"
}

# cpu_wrk PID URL SECONDS [wrk args...]: prints "<us per request> <requests>"
cpu_wrk() {
	local pid=$1 url=$2 secs=$3 t0 t1 n hz
	shift 3
	hz=$(getconf CLK_TCK)
	t0=$(cpu_ticks "$pid")
	wrk -t1 -c"$CPU_CONNS" -d"${secs}s" "$@" "$url" >"$WORK/cpu.wrk" 2>&1
	t1=$(cpu_ticks "$pid")
	n=$(awk '/requests in/ { print $1; exit }' "$WORK/cpu.wrk")
	"$PY" -c 'import sys; t0,t1,n,hz=map(float,sys.argv[1:]); print(f"{(t1-t0)/hz*1e6/n:.4f} {int(n)}" if n > 0 else "nan 0")' \
		"$t0" "$t1" "${n:-0}" "$hz"
}

# cpu_summary FILE: "medianA medianB median-ratio min-ratio max-ratio"
cpu_summary() {
	"$PY" - "$1" <<'EOF'
import statistics, sys
a, b, r, pend = [], [], [], None
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) != 2 or p[1] == "nan":
        continue
    v = float(p[1])
    if p[0] == "A":
        a.append(v); pend = v
    elif pend:
        b.append(v); r.append(v / pend); pend = None
m = lambda x: statistics.median(x) if x else float("nan")
print(f"{m(a):.3f} {m(b):.3f} {m(r):.4f} {min(r) if r else float('nan'):.3f} {max(r) if r else float('nan'):.3f}")
EOF
}

cpu_row() { # file label target(- for none)
	local ma mb r lo hi
	read -r ma mb r lo hi < <(cpu_summary "$1")
	local res="ratio $(f3 "$r") (pairs $lo..$hi)"
	if [ "$3" = - ]; then
		row 3 "CPU per request: $2" "$ma us" "$mb us" "$res" "" ""
	else
		row 3 "CPU per request: $2" "$ma us" "$mb us" "$res" "<= $3" "$(check "$r" le "$3")"
	fi
}

cpu_nginx() { # name label target wrk-args...
	local name=$1 label=$2 target=$3 i v f="$WORK/cpu.ngx.$1"
	shift 3
	: >"$f"
	for ((i = 0; i < WRK_PAIRS; i++)); do
		for v in A B; do
			ngx_start "$v" || { stop_pid "$NGX_PID"; continue; }
			((WRK_WARMUP)) && wrk -t1 -c"$CPU_CONNS" -d1s "$@" "http://127.0.0.1:$NGX_PORT/file.txt" >/dev/null 2>&1
			echo "$v $(cpu_wrk "$NGX_PID" "http://127.0.0.1:$NGX_PORT/file.txt" "$WRK_SECONDS" "$@" | awk '{print $1}')" >>"$f"
			stop_pid "$NGX_PID"
		done
	done
	cpu_row "$f" "$label" "$target"
}

# cpu_server NAME LABEL TARGET PATH START-FUNCTION: servers started per run
cpu_server() {
	local name=$1 label=$2 target=$3 path=$4 start=$5 i v f="$WORK/cpu.$1"
	: >"$f"
	for ((i = 0; i < WRK_PAIRS; i++)); do
		for v in A B; do
			"$start" "$v" || { stop_pid "$CPU_PID"; continue; }
			local url="http://127.0.0.1:$CPU_PORT$path"
			((WRK_WARMUP)) && wrk -t1 -c"$CPU_CONNS" -d1s "$url" >/dev/null 2>&1
			echo "$v $(cpu_wrk "$CPU_PID" "$url" "$WRK_SECONDS" | awk '{print $1}')" >>"$f"
			stop_pid "$CPU_PID"
		done
	done
	cpu_row "$f" "$label" "$target"
}

cpu_uvicorn_start() { # A|B: sets CPU_PID, CPU_PORT
	local envs=()
	[ "$1" = B ] && envs=(LD_PRELOAD="$SO" "${SHIM_EXPORT_ENV[@]}" OTEL_SERVICE_NAME=bench-uvicorn)
	: >"$WORK/cpu.uv.json"
	env "${envs[@]}" "$PY" "$ROOT/scripts/demo/server.py" --ports 1 --latency-ms 0,0 >"$WORK/cpu.uv.json" 2>>"$WORK/cpu.uv.log" &
	CPU_PID=$!
	PIDS+=("$CPU_PID")
	wait_line "$WORK/cpu.uv.json" 30 >/dev/null || return 1
	CPU_PORT=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["ports"][0])' "$WORK/cpu.uv.json")
	wait_http "http://127.0.0.1:$CPU_PORT/v1/work" 10
}

cpu_node_start() { # A|B: sets CPU_PID, CPU_PORT
	local envs=()
	[ "$1" = B ] && envs=(LD_PRELOAD="$SO" "${SHIM_EXPORT_ENV[@]}" OTEL_SERVICE_NAME=bench-node)
	CPU_PORT=$(free_port)
	env "${envs[@]}" "$NODE" "$D/server.js" "$CPU_PORT" >"$WORK/cpu.node.out" 2>"$WORK/cpu.node.err" &
	CPU_PID=$!
	PIDS+=("$CPU_PID")
	wait_http "http://127.0.0.1:$CPU_PORT/" 20
}

cpu_server_rows() {
	local NX_OK=0
	[ -x "${NGX:-}" ] && command -v wrk >/dev/null && declare -F ngx_start >/dev/null && NX_OK=1
	if ((NX_OK)); then
		cpu_nginx ka "nginx keep-alive (worker)" 1.03
		cpu_nginx close "nginx connection per request (worker)" 1.02 -H 'Connection: close'
		NGX_CONTROL=1
		cpu_nginx ka_aa "nginx keep-alive, control: no shim either side" -
		NGX_CONTROL=0
	else
		na_row 3 "CPU per request: nginx keep-alive (worker)" "nginx or wrk missing" "<= 1.03"
		na_row 3 "CPU per request: nginx connection per request (worker)" "nginx or wrk missing" "<= 1.02"
	fi
	if command -v wrk >/dev/null && "$PY" -c 'import uvicorn, fastapi' 2>/dev/null; then
		cpu_server uv "uvicorn/FastAPI server (GET /v1/work)" - /v1/work cpu_uvicorn_start
	else
		na_row 3 "CPU per request: uvicorn/FastAPI server (GET /v1/work)" "wrk or uvicorn/fastapi missing"
	fi
	NODE=${NODE:-$(command -v node || true)}
	if command -v wrk >/dev/null && [ -n "$NODE" ]; then
		cpu_server node "node http server" - / cpu_node_start
	else
		na_row 3 "CPU per request: node http server" "wrk or node missing"
	fi
}
