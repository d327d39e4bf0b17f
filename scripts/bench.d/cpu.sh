# SPDX-License-Identifier: Apache-2.0
# CPU per request, sourced by scripts/bench (uses its helpers: row, check,
# stop_pid, wait_http, wait_line, free_port, cg_row, and section 3's nginx
# configuration in $NX).
#
#   cpu_callgrind_rows   section 1: a connection's life; the HTTP pair and the
#                        connection's life again with the exporter on,
#                        exporting every second to the live collector
#   cpu_server_rows      section 3: the server's CPU time per request served,
#                        without and with the shim, alternating; and the
#                        nginx worker's instructions per request (callgrind)
#
# CPU per request is the server process's utime + stime (/proc/PID/stat, all
# its threads, the shim's exporter thread included) over a wrk run, divided
# by the requests wrk completed in it. The two servers, without (A) and with
# (B) the shim, are loaded at the same time: both pinned to one core, a wrk
# for each pinned to the other (when there are two), for the same seconds.
# Whatever the machine does meanwhile (its speed drifting by tens of percent
# over seconds, another guest taking the core) then falls on both alike, and
# the ratio of a round is the shim's; taking the rounds one after the other,
# A then B, left pairs 25 % apart on this machine, where side by side rounds
# of two identical servers land within 1.5 %. The row's ratio is the median
# of the rounds' ratios, their lowest and highest printed too; a first round
# warms both and is not counted.

CPU_CONNS=8   # wrk connections per server: fewer than the throughput rows, so no server is saturated into timeouts
if [ "$MODE" = smoke ]; then
	CPU_ROUNDS=1 CPU_WARM=0 CPU_SECONDS=1 CPU_CG_REQUESTS=0
else
	CPU_ROUNDS=8 CPU_WARM=1 CPU_SECONDS=5 CPU_CG_REQUESTS=1000
fi
# The server on the first core, wrk on the second, when there are two.
CPU_PIN_SERVER=() CPU_PIN_CLIENT=()
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
	CPU_PIN_SERVER=(taskset -c 0) CPU_PIN_CLIENT=(taskset -c 1)
fi

cpu_callgrind_rows() {
	command -v valgrind >/dev/null || {
		na_row 1 "instr/call: connection's life (socket, connect, accept, 2 closes; no destination rule)" "valgrind missing"
		return
	}
	# An empty NEMOLENS_DESTINATIONS overrides the rule cg_instr names.
	cg_row conn_life "connection's life (socket, connect, accept, 2 closes; no destination rule)" 400 NEMOLENS_DESTINATIONS=
	[ -n "$OTLP_URL" ] || return
	local saved=("${SHIM_QUIET_ENV[@]}")
	SHIM_QUIET_ENV=("${SHIM_EXPORT_ENV[@]}")
	cg_row http_server "HTTP pair, server side, exporter on (exporting every second)" 750 NEMOLENS_HTTP=server
	cg_row http_client "HTTP pair, client side, exporter on (exporting every second)" 750 NEMOLENS_HTTP=client
	cg_row conn_life "connection's life, exporter on (exporting every second)" 400 NEMOLENS_DESTINATIONS=
	# The same three against the program with an idle thread of its own
	# (calls.c, BENCH_THREAD): what is left is the shim's, not glibc's
	# multi-threaded path that the exporter thread puts the program on.
	CG_BOTH=BENCH_THREAD=1
	cg_row http_server "HTTP pair, server side, exporter on, the program with a thread of its own" 750 NEMOLENS_HTTP=server
	cg_row http_client "HTTP pair, client side, exporter on, the program with a thread of its own" 750 NEMOLENS_HTTP=client
	cg_row conn_life "connection's life, exporter on, the program with a thread of its own" 400 NEMOLENS_DESTINATIONS=
	CG_BOTH=
	SHIM_QUIET_ENV=("${saved[@]}")
}

cpu_ticks() { # pid: utime + stime in clock ticks (the fields after the command's closing parenthesis)
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
	s=${s##*) }
	awk '{ print $12 + $13 }' <<<"$s"
}

# cpu_round PID-A URL-A PID-B URL-B [wrk args...]: one round, both servers
# loaded at once; prints "<A us per request> <B us per request>"
cpu_round() {
	local pa=$1 ua=$2 pb=$3 ub=$4 a0 a1 b0 b1 na nb wa wb hz
	shift 4
	hz=$(getconf CLK_TCK)
	a0=$(cpu_ticks "$pa")
	b0=$(cpu_ticks "$pb")
	"${CPU_PIN_CLIENT[@]}" wrk -t1 -c"$CPU_CONNS" -d"${CPU_SECONDS}s" "$@" "$ua" >"$WORK/cpu.wrk.A" 2>&1 &
	wa=$!
	"${CPU_PIN_CLIENT[@]}" wrk -t1 -c"$CPU_CONNS" -d"${CPU_SECONDS}s" "$@" "$ub" >"$WORK/cpu.wrk.B" 2>&1 &
	wb=$!
	wait "$wa" "$wb"
	a1=$(cpu_ticks "$pa")
	b1=$(cpu_ticks "$pb")
	na=$(awk '/requests in/ { print $1; exit }' "$WORK/cpu.wrk.A")
	nb=$(awk '/requests in/ { print $1; exit }' "$WORK/cpu.wrk.B")
	"$PY" -c '
import sys
a0, a1, na, b0, b1, nb, hz = map(float, sys.argv[1:])
us = lambda t0, t1, n: f"{(t1 - t0) / hz * 1e6 / n:.4f}" if n > 0 else "nan"
print(us(a0, a1, na), us(b0, b1, nb))' "$a0" "$a1" "${na:-0}" "$b0" "$b1" "${nb:-0}" "$hz"
}

# cpu_rounds FILE PID-A URL-A PID-B URL-B [wrk args...]: the warm-up and the
# counted rounds, each as "A <us>" and "B <us>" lines in FILE
cpu_rounds() {
	local f=$1 i a b
	shift
	: >"$f"
	for ((i = -CPU_WARM; i < CPU_ROUNDS; i++)); do
		read -r a b < <(cpu_round "$@")
		((i >= 0)) && printf 'A %s\nB %s\n' "$a" "$b" >>"$f"
	done
}

# cpu_summary FILE: "medianA medianB median-ratio min-ratio max-ratio";
# the k-th A line pairs with the k-th B line (the same round).
cpu_summary() {
	"$PY" - "$1" <<'EOF'
import statistics, sys
a, b = [], []
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) != 2 or p[1] == "nan":
        continue
    (a if p[0] == "A" else b).append(float(p[1]))
r = [y / x for x, y in zip(a, b) if x > 0]
m = lambda x: statistics.median(x) if x else float("nan")
print(f"{m(a):.3f} {m(b):.3f} {m(r):.4f} {min(r) if r else float('nan'):.3f} {max(r) if r else float('nan'):.3f}")
EOF
}

cpu_row() { # file label target(- for none)
	local ma mb r lo hi
	read -r ma mb r lo hi < <(cpu_summary "$1")
	local res="ratio $(f3 "$r") (rounds $lo..$hi)"
	if [ "$3" = - ]; then
		row 3 "CPU per request: $2" "$ma us" "$mb us" "$res" "" ""
	else
		row 3 "CPU per request: $2" "$ma us" "$mb us" "$res" "<= $3" "$(check "$r" le "$3")"
	fi
}

# cpu_ngx_conf PORT DIR: section 3's nginx.conf for a server on PORT with
# its own pid file and logs in DIR
cpu_ngx_conf() {
	mkdir -p "$2/logs"
	sed -e "s/127\.0\.0\.1:$NGX_PORT /127.0.0.1:$1 /" -e "s|^pid .*|pid $2/nginx.pid;|" \
		-e "s|^error_log .*|error_log $2/logs/error.log warn;|" "$NX/nginx.conf" >"$2/nginx.conf"
}

# cpu_ngx_start A|B PORT DIR: section 3's nginx on PORT with its own pid
# file and logs in DIR, pinned; sets CPU_PID (the process whose CPU is
# counted: nginx) and CPU_STOP (the one to stop: nginx, or the launcher
# that runs it). NGX_RUN=1: B runs under nemolens-run, which exports for it,
# so that nginx has no thread of the shim (its CPU is the launcher's).
# NGX_B_ENV (an array): B's environment instead of the shim's.
NGX_B_ENV=()
cpu_ngx_start() {
	local v=$1 port=$2 dir=$3 envs=() run=()
	cpu_ngx_conf "$port" "$dir"
	[ "$v" = B ] && [ "${NGX_CONTROL:-0}" = 0 ] && envs=(LD_PRELOAD="$SO" "${SHIM_EXPORT_ENV[@]}" OTEL_SERVICE_NAME=bench-nginx)
	[ "$v" = B ] && ((${#NGX_B_ENV[@]})) && envs=("${NGX_B_ENV[@]}")
	if [ "$v" = B ] && [ "${NGX_RUN:-0}" = 1 ]; then
		envs=("${SHIM_EXPORT_ENV[@]}" OTEL_SERVICE_NAME=bench-nginx)
		run=("$B/nemolens-run" --)
	fi
	env "${envs[@]}" "${CPU_PIN_SERVER[@]}" "${run[@]}" "$NGX" -p "$NX" -e "$dir/logs/error.log" -c "$dir/nginx.conf" \
		>"$dir/logs/out.log" 2>&1 &
	CPU_STOP=$!
	CPU_PID=$CPU_STOP
	PIDS+=("$CPU_STOP")
	wait_http "http://127.0.0.1:$port/file.txt" 10 || return 1
	((${#run[@]})) && CPU_PID=$(cat "$dir/nginx.pid" 2>/dev/null)
	[ -n "$CPU_PID" ]
}

# cpu_nginx NAME LABEL TARGET WRK-ARGS...: both servers up for the whole row
cpu_nginx() {
	local name=$1 label=$2 target=$3 v f="$WORK/cpu.ngx.$1"
	shift 3
	local -A pid port stop
	for v in A B; do
		port[$v]=$(free_port)
		if ! cpu_ngx_start "$v" "${port[$v]}" "$WORK/cpu.ngx.$name.$v"; then
			stop_pid "$CPU_STOP"
			[ "$v" = B ] && stop_pid "${stop[A]}"
			na_row 3 "CPU per request: $label" "nginx did not start" "${target#-}"
			return
		fi
		pid[$v]=$CPU_PID
		stop[$v]=$CPU_STOP
	done
	cpu_rounds "$f" "${pid[A]}" "http://127.0.0.1:${port[A]}/file.txt" "${pid[B]}" "http://127.0.0.1:${port[B]}/file.txt" "$@"
	stop_pid "${stop[A]}"
	stop_pid "${stop[B]}"
	cpu_row "$f" "$label" "$target"
}

# cpu_ngx_instr A|B N ka|close: the instructions of the nginx worker's
# thread (callgrind; the exporter thread apart) over N requests
cpu_ngx_instr() {
	local v=$1 n=$2 mode=$3 dir="$WORK/cpu.cg.$1.$2.$3" port p envs=()
	port=$(free_port)
	cpu_ngx_conf "$port" "$dir"
	[ "$v" = B ] && envs=(LD_PRELOAD="$SO" "${SHIM_EXPORT_ENV[@]}" OTEL_SERVICE_NAME=bench-nginx)
	env "${envs[@]}" valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$dir/cg.out" \
		--dump-instr=no "$NGX" -p "$NX" -e "$dir/logs/error.log" -c "$dir/nginx.conf" >"$dir/vg.log" 2>&1 &
	p=$!
	PIDS+=("$p")
	# The exporter thread's first export (which loads the export library)
	# before the requests: else a short run leaves it to the exit's flush,
	# on the worker's thread.
	if ! wait_http "http://127.0.0.1:$port/file.txt" 60 || ! sleep 3 || ! "$PY" "$D/requests.py" "$port" "$n" "$mode"; then
		stop_pid "$p"
		echo nan
		return
	fi
	stop_pid "$p"
	awk '/^(summary|totals):/ { print $2; exit }' "$dir/cg.out-01" 2>/dev/null || echo nan
}

# cpu_ngx_instr_row ka|close LABEL: instructions per request, the
# difference of a long and a short run (start-up and exit cancel)
cpu_ngx_instr_row() {
	local mode=$1 label="instr/request: nginx $2, worker thread (callgrind)" v lo=200 hi pa pb added ratio
	hi=$((200 + CPU_CG_REQUESTS))
	local -A small big
	for v in A B; do
		small[$v]=$(cpu_ngx_instr "$v" "$lo" "$mode")
		big[$v]=$(cpu_ngx_instr "$v" "$hi" "$mode")
	done
	read -r pa pb added ratio < <("$PY" -c '
import sys
sa, ba, sb, bb, n = sys.argv[1:]
try:
    a, b = (float(ba) - float(sa)) / float(n), (float(bb) - float(sb)) / float(n)
    print(f"{a:.0f} {b:.0f} {b - a:.0f} {b / a:.3f}")
except ValueError:
    print("nan nan nan nan")' "${small[A]}" "${big[A]}" "${small[B]}" "${big[B]}" "$CPU_CG_REQUESTS")
	row 3 "$label" "$pa instr" "$pb instr" "+$added instr (ratio $ratio)" "" ""
}

# cpu_server NAME LABEL TARGET PATH START-FUNCTION: both servers up for the
# whole row (START-FUNCTION A|B sets CPU_PID and CPU_PORT)
cpu_server() {
	local name=$1 label=$2 target=$3 path=$4 start=$5 v
	local -A pid port
	for v in A B; do
		if ! "$start" "$v"; then
			stop_pid "$CPU_PID"
			[ "$v" = B ] && stop_pid "${pid[A]}"
			na_row 3 "CPU per request: $label" "the server did not start" "${target#-}"
			return
		fi
		pid[$v]=$CPU_PID
		port[$v]=$CPU_PORT
	done
	cpu_rounds "$WORK/cpu.$name" "${pid[A]}" "http://127.0.0.1:${port[A]}$path" "${pid[B]}" "http://127.0.0.1:${port[B]}$path"
	stop_pid "${pid[A]}"
	stop_pid "${pid[B]}"
	cpu_row "$WORK/cpu.$name" "$label" "$target"
}

cpu_uvicorn_start() { # A|B: sets CPU_PID, CPU_PORT
	local envs=()
	[ "$1" = B ] && envs=(LD_PRELOAD="$SO" "${SHIM_EXPORT_ENV[@]}" OTEL_SERVICE_NAME=bench-uvicorn)
	: >"$WORK/cpu.uv.$1.json"
	env "${envs[@]}" "${CPU_PIN_SERVER[@]}" "$PY" "$ROOT/scripts/demo/server.py" --ports 1 --latency-ms 0,0 >"$WORK/cpu.uv.$1.json" 2>>"$WORK/cpu.uv.log" &
	CPU_PID=$!
	PIDS+=("$CPU_PID")
	wait_line "$WORK/cpu.uv.$1.json" 30 >/dev/null || return 1
	CPU_PORT=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["ports"][0])' "$WORK/cpu.uv.$1.json")
	wait_http "http://127.0.0.1:$CPU_PORT/v1/work" 10
}

cpu_node_start() { # A|B: sets CPU_PID, CPU_PORT
	local envs=()
	[ "$1" = B ] && envs=(LD_PRELOAD="$SO" "${SHIM_EXPORT_ENV[@]}" OTEL_SERVICE_NAME=bench-node)
	CPU_PORT=$(free_port)
	env "${envs[@]}" "${CPU_PIN_SERVER[@]}" "$NODE" "$D/server.js" "$CPU_PORT" >"$WORK/cpu.node.$1.out" 2>"$WORK/cpu.node.$1.err" &
	CPU_PID=$!
	PIDS+=("$CPU_PID")
	wait_http "http://127.0.0.1:$CPU_PORT/" 20
}

cpu_server_rows() {
	local NX_OK=0
	[ -x "${NGX:-}" ] && command -v wrk >/dev/null && [ -f "${NX:-}/nginx.conf" ] && NX_OK=1
	if ((NX_OK)); then
		cpu_nginx ka "nginx keep-alive (worker)" 1.03
		cpu_nginx close "nginx connection per request (worker)" 1.02 -H 'Connection: close'
		if cmake --build "$B" --target nemolens-run >>"$WORK/build.log" 2>&1; then
			NGX_RUN=1
			cpu_nginx run_ka "nginx under nemolens-run, keep-alive (worker)" 1.03
			cpu_nginx run_close "nginx under nemolens-run, connection per request (worker)" 1.02 -H 'Connection: close'
			NGX_RUN=0
		else
			na_row 3 "CPU per request: nginx under nemolens-run, keep-alive (worker)" "nemolens-run did not build" "<= 1.03"
			na_row 3 "CPU per request: nginx under nemolens-run, connection per request (worker)" "nemolens-run did not build" "<= 1.02"
		fi
		NGX_CONTROL=1
		cpu_nginx ka_aa "nginx keep-alive, control: no shim either side" -
		NGX_CONTROL=0
		# What of the shim's cost is its exporter's: a thread alone (any
		# second thread puts nginx's own calls on libc's multi-threaded
		# paths), and the shim without the exporter.
		NGX_B_ENV=(LD_PRELOAD="$BIN/idle_thread.so")
		cpu_nginx ka_idle "nginx keep-alive, control: an idle thread preloaded, no shim" -
		NGX_B_ENV=(LD_PRELOAD="$SO" OTEL_METRICS_EXPORTER=none)
		cpu_nginx ka_quiet "nginx keep-alive, the shim with its exporter off" -
		NGX_B_ENV=()
		if command -v valgrind >/dev/null && ((CPU_CG_REQUESTS > 0)); then
			cpu_ngx_instr_row ka "keep-alive"
			cpu_ngx_instr_row close "connection per request"
		else
			na_row 3 "instr/request: nginx keep-alive, worker thread (callgrind)" "full run with valgrind only"
			na_row 3 "instr/request: nginx connection per request, worker thread (callgrind)" "full run with valgrind only"
		fi
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
