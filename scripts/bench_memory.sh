#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cost of the memory sampler (NEMOLENS_MEMORY_PROFILING=true). Prints figures;
# no pass/fail.
#
#   scripts/bench_memory.sh [--smoke]
#
# NL_SO names the shim (default build/libnemolens_preload.so). Helpers are
# built from scripts/bench.d/mem_*.c into a temporary directory. Every figure
# comes from the sampler's own debug line (NEMOLENS_LOG_LEVEL=debug), which
# gives, per sample, the sampler thread's CPU time (CLOCK_THREAD_CPUTIME_ID)
# and the cost of the PSS reads it made.
#  1. a tree of 50 processes (the root and 49 forks, 1 MiB touched each),
#     sampled every 100 ms: CPU per sample, with PSS (default budget) and
#     without (NEMOLENS_PSS_BUDGET_PERCENT=0: /proc scan + RSS only)
#  2. one process with 4 GiB touched (4 KiB pages), sampled every 100 ms, with
#     the default budget (1 % of a core) and with the budget off (100 %): cost
#     of one smaps_rollup read, reads made, and the sampler's CPU share once
#     the memory is touched. The 4 GiB are freed as soon as each run ends.
# The last line is a one-line summary (scripts/bench shows it).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
D="$ROOT/scripts/bench.d"
SO=${NL_SO:-$ROOT/build/libnemolens_preload.so}
SMOKE=0
[ "${1:-}" = --smoke ] && SMOKE=1
if [ ! -f "$SO" ]; then
	echo "bench_memory: no shim at $SO (build first, or set NL_SO)" >&2
	exit 1
fi
SO=$(cd "$(dirname "$SO")" && pwd)/$(basename "$SO")

W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
for h in mem_fanout mem_hog; do
	cc -O2 -o "$W/$h" "$D/$h.c" || exit 1
done

if [ $SMOKE = 1 ]; then
	TREE_SECS=2 HOG_MB=256 HOG_SECS=3
else
	TREE_SECS=10 HOG_MB=4096 HOG_SECS=12
fi
INTERVAL_MS=100

# run LOG [VAR=value...] -- program args: the program under the shim, sampling.
run() {
	local log=$1
	shift
	local vars=()
	while [ "$1" != -- ]; do vars+=("$1"); shift; done
	shift
	env -i PATH=/usr/bin:/bin LD_PRELOAD="$SO" NEMOLENS_MEMORY_PROFILING=true \
		NEMOLENS_MEMORY_SAMPLE_INTERVAL_MS=$INTERVAL_MS OTEL_METRICS_EXPORTER=console \
		NEMOLENS_CONSOLE_PATH=/dev/null OTEL_METRIC_EXPORT_INTERVAL=600000 NEMOLENS_LOG_LEVEL=debug NEMOLENS_LOG_PATH=stderr \
		NEMOLENS_SERVER_NAME=bench "${vars[@]}" "$@" 2>"$log"
}

# stats LOG MIN_RSS: one line of key=value figures over the samples whose
# tree RSS is at least MIN_RSS bytes.
stats() {
	grep -o 'memsampler: pid [0-9]* sample .*' "$1" | awk -v min="$2" -v iv=$INTERVAL_MS '
	{
		for (i = 5; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
		if (f["rss"] + 0 < min) next
		n++; cpu[n] = f["cpu_us"]; sum += f["cpu_us"]; members = f["members"]; scanned = f["scanned"]
		if (f["pss_reads"] > 0) { reads += f["pss_reads"]; rc[++nr] = f["pss_read_cost_us"] / f["pss_reads"] }
	}
	function median(a, k,   i, j, t) {
		for (i = 2; i <= k; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
		return k ? a[int((k + 1) / 2)] : 0
	}
	END {
		if (!n) { print "samples=0"; exit }
		m = median(cpu, n); p95i = int(n * 0.95); if (p95i < 1) p95i = 1
		printf "samples=%d members=%d scanned=%d cpu_median_us=%d cpu_mean_us=%.0f cpu_p95_us=%d ", n, members, scanned, m, sum / n, cpu[p95i]
		printf "pss_reads=%d pss_read_median_us=%d cpu_share_pct=%.3f\n", reads, median(rc, nr), sum / (n * iv * 1000) * 100
	}'
}

get() { printf '%s\n' "$1" | tr ' ' '\n' | awk -F= -v k="$2" '$1 == k { print $2 }'; }

echo "memory sampler benchmark ($( [ $SMOKE = 1 ] && echo smoke || echo full )): $(nproc) CPUs, $(uname -r), $(ls /proc | grep -c '^[0-9]') processes on the host, interval ${INTERVAL_MS} ms"
echo

echo "1. tree of 50 processes, ${TREE_SECS} s"
run "$W/tree.log" -- "$W/mem_fanout" 50 1024 $TREE_SECS
T1=$(stats "$W/tree.log" 0)
run "$W/tree0.log" NEMOLENS_PSS_BUDGET_PERCENT=0 -- "$W/mem_fanout" 50 1024 $TREE_SECS
T0=$(stats "$W/tree0.log" 0)
printf '   with PSS (budget 1%%):   %s\n' "$T1"
printf '   without PSS (budget 0): %s\n' "$T0"
echo

echo "2. one process with $HOG_MB MiB touched, ${HOG_SECS} s each"
MIN=$((HOG_MB * 1024 * 1024 * 95 / 100))
run "$W/hog_on.log" -- "$W/mem_hog" $HOG_MB $HOG_SECS
H1=$(stats "$W/hog_on.log" $MIN)
run "$W/hog_off.log" NEMOLENS_PSS_BUDGET_PERCENT=100 -- "$W/mem_hog" $HOG_MB $HOG_SECS
H0=$(stats "$W/hog_off.log" $MIN)
printf '   budget on (1%%):    %s\n' "$H1"
printf '   budget off (100%%): %s\n' "$H0"
echo

printf 'summary: 50-process tree %s us CPU/sample (median; %s us without PSS); %s MiB: PSS read %s us, budget 1%%: %s reads, %s%% CPU; budget off: %s reads, %s%% CPU\n' \
	"$(get "$T1" cpu_median_us)" "$(get "$T0" cpu_median_us)" $HOG_MB "$(get "$H0" pss_read_median_us)" \
	"$(get "$H1" pss_reads)" "$(get "$H1" cpu_share_pct)" "$(get "$H0" pss_reads)" "$(get "$H0" cpu_share_pct)"
