#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Smoke test of scripts/bench: `scripts/bench --smoke` runs every section with
# tiny iteration counts and must print the result table with every row (a row
# may say n/a when a component is missing, and a missed target is a finding,
# not a failure). Run by ctest with NL_SRC (the source tree) and NL_BIN (the
# build's tests dir); the bench measures that build as it is.
set -uo pipefail

SRC=${NL_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
if [ -n "${NL_SANITIZER_RUNTIME:-}" ]; then
	# The bench builds and measures its own Release .so: a sanitizer build of
	# the project adds nothing to this test but minutes.
	echo "skipped: sanitizer build (the bench measures its own Release build)"
	exit 0
fi
BUILD=$(cd "${NL_BIN:?the tests dir of a build tree}/.." && pwd)
OUT=$(mktemp "${TMPDIR:-/tmp}/bench-smoke.XXXXXX")
REPORTS=$(mktemp -d "${TMPDIR:-/tmp}/bench-smoke-results.XXXXXX")
trap 'rm -rf "$OUT" "$REPORTS"' EXIT

fail() {
	echo "FAIL: $*" >&2
	echo "---- output ----" >&2
	cat "$OUT" >&2
	exit 1
}

start=$SECONDS
day0=$(date -u +%F)
BENCH_USE_BUILD="$BUILD" BENCH_RESULTS_DIR="$REPORTS" timeout 540 "$SRC/scripts/bench" --smoke >"$OUT" 2>&1
rc=$?
[ "$rc" -eq 0 ] || fail "scripts/bench --smoke exited with $rc"

rows=(
	"instr/call: connect, tracked dest (blocking, named rule)"
	"instr/call: connect, tracked dest, non-blocking + SO_ERROR settle"
	"instr/call: connect, tracked dest, from a known call site (call sites on)"
	"instr/call: close, tracked TCP socket"
	"instr/call: send, tracked TCP socket"
	"instr/call: recv, tracked TCP socket"
	"instr/call: read, tracked TCP socket"
	"instr/call: write, tracked TCP socket"
	"instr/call: close, untracked fd (/dev/null)"
	"instr/call: send, untracked fd (socketpair)"
	"instr/call: recv, untracked fd (socketpair)"
	"instr/call: read, untracked fd (pipe)"
	"instr/call: write, untracked fd (pipe)"
	"instr/call: syscall(), a number it passes through (getppid)"
	"instr/call: read, untracked fd, while an HTTP connection is followed"
	"instr/call: send, TCP socket found not HTTP, while an HTTP connection is followed"
	"instr/call: HTTP pair, server side (GET, 6 headers; 200, 1 KiB body)"
	"instr/call: HTTP pair, client side (same exchange)"
	"instr/call: HTTP/2 GET, server side (same exchange, HPACK dynamic table)"
	"instr/call: HTTP/2 GET, client side"
	"instr/call: gRPC unary call, server side (HPACK dynamic table)"
	"instr/call: gRPC unary call, client side"
	"instr/call: connection's life (socket, connect, accept, 2 closes; no destination rule)"
	"instr/call: HTTP pair, server side, exporter on (exporting every second)"
	"instr/call: HTTP pair, client side, exporter on (exporting every second)"
	"instr/call: connection's life, exporter on (exporting every second)"
	"instr/call: HTTP pair, server side, exporter on, the program with a thread of its own"
	"instr/call: HTTP pair, client side, exporter on, the program with a thread of its own"
	"instr/call: connection's life, exporter on, the program with a thread of its own"
	"instr/byte: GenAI scanner, 200 KB vLLM chat completion body"
	"instr/byte: GenAI scanner, chat completions event stream (2,000 chunks)"
	"instr/compressed byte: GenAI scanner, the 200 KB body gzip-compressed"
	"instr/call: HTTP pair, server side, GenAI on minus NEMOLENS_GENAI=off"
	"instr/call: HTTP pair, client side, GenAI on minus NEMOLENS_GENAI=off"
	"wall: loopback connect+accept+close (tracked dest)"
	"wall: socketpair 1-byte ping-pong (untracked)"
	"wall: loopback TCP 1-byte ping-pong (tracked)"
	"wall: a process's first connect(), call sites off -> on"
	"nginx keep-alive: throughput"
	"nginx keep-alive: p99 latency"
	"nginx connection per request: throughput"
	"nginx connection per request: p99 latency"
	"nginx keep-alive, control: no shim either side: throughput"
	"nginx keep-alive, control: no shim either side: p99 latency"
	"nginx connection per request, control: no shim either side: throughput"
	"nginx connection per request, control: no shim either side: p99 latency"
	"aiohttp -> uvicorn (client under shim): requests/s"
	"uvicorn/FastAPI server under the shim (HTTP metrics on): requests/s"
	"CPU per request: nginx keep-alive (worker)"
	"CPU per request: nginx connection per request (worker)"
	"CPU per request: nginx under nemolens-run, keep-alive (worker)"
	"CPU per request: nginx under nemolens-run, connection per request (worker)"
	"CPU per request: nginx keep-alive, control: no shim either side"
	"CPU per request: nginx keep-alive, control: an idle thread preloaded, no shim"
	"CPU per request: nginx keep-alive, the shim with its exporter off"
	"instr/request: nginx keep-alive, worker thread (callgrind)"
	"instr/request: nginx connection per request, worker thread (callgrind)"
	"CPU per request: uvicorn/FastAPI server (GET /v1/work)"
	"CPU per request: node http server"
	"node http server (b) under the shim: throughput"
	"node http server (c) under OpenTelemetry auto-instrumentation: throughput"
	"node: shim ahead of OpenTelemetry (ratio b / ratio c)"
	"RSS added: idle process"
	"RSS added: 10,000 open connections (after first export)"
	"RSS added: 10,000 idle HTTP keep-alive connections (server)"
	"RSS added: 1,000 idle HTTP/2 connections (server), per connection"
	"export of 10 series: CPU, bytes"
	"export of 1,000 series: CPU, bytes"
	"export of 2,000 series (cardinality cap): CPU, bytes"
	"memory sampler: cost per sample"
	"fork() of a C program while the collector never answers (plain LD_PRELOAD"
	"fork() of a C program while the collector never answers (nemolens-run"
	"exit of a short Python process that connected once, collector never answers (plain LD_PRELOAD"
	"exit of a short Python process that connected once, collector never answers (nemolens-run"
	"python3 -c pass (plain LD_PRELOAD"
	"python3 -c pass (a process of a tree under nemolens-run"
	"python3 -c pass (nemolens-run started for it, the launcher's exec included"
	"python3 -c pass (a bare launcher without the shim"
	"CPU to spawn and reap /bin/true, one at a time, modes interleaved (an empty .so preloaded"
	"CPU to spawn and reap /bin/true, one at a time, modes interleaved (plain LD_PRELOAD"
	"CPU to spawn and reap /bin/true, one at a time, modes interleaved (nemolens-run"
	"page faults of a spawned /bin/true, its exec and exit included (an empty .so preloaded"
	"page faults of a spawned /bin/true, its exec and exit included (plain LD_PRELOAD"
	"page faults of a spawned /bin/true, its exec and exit included (nemolens-run"
	"RSS added to an idle Python process after its first export (plain LD_PRELOAD)"
	"RSS added to an idle Python process after its first export (nemolens-run)"
	"threads and sockets of the shim in a program under nemolens-run"
	"export intervals (export CPU inside the target)"
	"nemolens-run's CPU exporting a tree of"
	"python3 -c pass: CPU time"
	"python3 -c 'import aiohttp': CPU time"
	"python3 -c 'import httpx': CPU time"
	"aiohttp, every acquisition queued: CPU per request"
	"request on a free slot: instr"
	"idle uvicorn, event loop probe off vs on: CPU"
	"scrape of /metrics, a tree of 100 live processes"
	"process figures: one sample of a tree of 100 processes"
	"process figures: one sample of a tree of 1,000 processes"
)

# The final table starts at its header line; every row must be in it, once.
table=$(awk '/^# +figure/ { on = 1 } on' "$OUT")
[ -n "$table" ] || fail "no result table printed"
for r in "${rows[@]}"; do
	n=$(grep -cF -- "$r" <<<"$table")
	[ "$n" -eq 1 ] || fail "table row '$r' appears $n times"
done
# Every row ends in a status: pass, miss, n/a, or nothing (figures without a target).
grep -Eq '[0-9]+ figures; targets: [0-9]+ pass, [0-9]+ miss' <<<"$table" || fail "no summary line"
nrows=$(grep -Eo '^[0-9]+ figures' <<<"$table" | grep -Eo '[0-9]+')
[ "$nrows" -eq "${#rows[@]}" ] || fail "table has $nrows rows, expected ${#rows[@]}"
# Rows that must have measured something here (all their tools are in the CI image).
for r in "instr/call: read, untracked fd (pipe)" "wall: socketpair 1-byte ping-pong (untracked)" \
	"RSS added: idle process" "export of 1,000 series: CPU, bytes"; do
	grep -F -- "$r" <<<"$table" | grep -qv 'n/a' || fail "row '$r' measured nothing"
done
# The spawn rows come from a program the bench builds and runs: each holds a
# ratio with its quartiles.
[ "$(grep -F -- "CPU to spawn and reap /bin/true, one at a time" <<<"$table" |
	grep -Ec 'quartiles x[0-9.]+-x[0-9.]+.* x[0-9]+\.[0-9]{3}')" -eq 3 ] || fail "the spawn rows hold no ratios"
# The memory sampler's row is made of figures its debug lines carry: each
# one a number, not an empty field (the lines' form changed once unnoticed).
grep -F -- "memory sampler: cost per sample" <<<"$table" | grep -Eq 'tree [0-9]+ us CPU/sample .*PSS read [0-9]+ us' ||
	fail "the memory sampler's row has no figures"
# The run's report: a file of its own in the results directory, named by
# the run's UTC time, host and mode, whose path the bench printed, with the
# date and the machine; bench.md in the build is a copy of it.
reports=("$REPORTS"/bench-*-smoke.md)
[ "${#reports[@]}" -eq 1 ] && [ -s "${reports[0]}" ] || fail "no report in the results directory: ${reports[*]}"
MD=${reports[0]}
[[ $(basename "$MD") =~ ^bench-[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{6}Z-.+-smoke\.md$ ]] || fail "report name $(basename "$MD")"
grep -qF "results written to $MD" "$OUT" || fail "the bench did not print the report's path"
grep -Eq '^- date: [0-9]{4}-[0-9]{2}-[0-9]{2}, [0-9]{2}:[0-9]{2} to [0-9]{2}:[0-9]{2} UTC$' "$MD" ||
	fail "$MD has no date line"
day=$(sed -n 's/^- date: \([0-9-]*\),.*/\1/p' "$MD")
[ "$day" = "$day0" ] || fail "$MD is dated $day, the run started on $day0"
grep -q '^- CPU: ' "$MD" && grep -q '^- kernel: ' "$MD" && grep -q '^- host: ' "$MD" ||
	fail "$MD lacks the machine description"
[ "$(grep -c '^| ' "$MD")" -eq $((${#rows[@]} + 1)) ] || fail "$MD does not hold every row"
cmp -s "$MD" "$BUILD/bench.md" || fail "$BUILD/bench.md is not a copy of the run's report"
echo "ok: bench smoke printed all ${#rows[@]} rows in $((SECONDS - start)) s"
