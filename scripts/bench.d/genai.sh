# SPDX-License-Identifier: Apache-2.0
# Model calls, sourced by scripts/bench (uses its helpers: row, na_row,
# check, cg_instr, and $BIN, $WORK, $CG_N, $CFLAGS_BENCH).
#
#   genai_callgrind_rows   section 1: the GenAI body scanner's instructions
#                          per body byte (scripts/bench.d/genai_bench.c): a
#                          200 KB vLLM chat completion, a 2,000-chunk event
#                          stream, the same body gzip-compressed (per
#                          compressed byte, no target); and what the GenAI
#                          feature adds to an HTTP exchange on another route:
#                          the HTTP pair with the shim, GenAI on minus
#                          NEMOLENS_GENAI=off.

GENAI_LABELS=(
	"instr/byte: GenAI scanner, 200 KB vLLM chat completion body"
	"instr/byte: GenAI scanner, chat completions event stream (2,000 chunks)"
	"instr/compressed byte: GenAI scanner, the 200 KB body gzip-compressed"
	"instr/call: HTTP pair, server side, GenAI on minus NEMOLENS_GENAI=off"
	"instr/call: HTTP pair, client side, GenAI on minus NEMOLENS_GENAI=off"
)

genai_callgrind_rows() {
	local l
	if ! command -v valgrind >/dev/null; then
		for l in "${GENAI_LABELS[@]}"; do na_row 1 "$l" "valgrind missing"; done
		return
	fi
	if ! gcc "${CFLAGS_BENCH[@]}" -gdwarf-4 -I"$ROOT/preload/http" -I"$ROOT/preload/base" -I"$ROOT/preload/arch" \
		-I"$ROOT/preload/follow" -o "$BIN/genai_bench" "$D/genai_bench.c" "$ROOT/preload/http/genai.c" \
		"$ROOT/preload/follow/genaiz.c" "$ROOT/preload/base/lazylib.c" -lz -ldl 2>"$WORK/genai_cc.log"; then
		cat "$WORK/genai_cc.log" >&2
		for l in "${GENAI_LABELS[@]}"; do na_row 1 "$l" "genai_bench did not build"; done
		return
	fi
	local op i=0 instr bytes per target status
	for op in json sse gzip; do
		l=${GENAI_LABELS[$i]}
		i=$((i + 1))
		valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.genai.$op.out" --toggle-collect="scan_$op" \
			--dump-instr=no --compress-strings=no "$BIN/genai_bench" >"$WORK/cg.genai.$op.log" 2>&1
		instr=$(awk '/^(summary|totals):/ { print $2; exit }' "$WORK/cg.genai.$op.out" 2>/dev/null)
		bytes=$(awk -v op="$op:" '$1 == op { print $2; exit }' "$WORK/cg.genai.$op.log")
		if [ -z "$instr" ] || [ -z "$bytes" ]; then
			na_row 1 "$l" "genai_bench failed"
			continue
		fi
		per=$("$PY" -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.2f}')" "$instr" "$bytes")
		case "$op" in
		json) target=1.5 ;;
		sse) target=3 ;;
		gzip)
			row 1 "$l" - "$instr instr, $bytes bytes" "$per instr/compressed byte" "" ""
			continue
			;;
		esac
		status=$(check "$per" le "$target")
		row 1 "$l" - "$instr instr, $bytes bytes" "$per instr/byte" "<= $target" "$status"
	done
	# The HTTP pair of section 1 (a GET on a route that is no model call),
	# with the shim both times: what the GenAI feature adds per exchange.
	local side on off diff lo=-10 hi=10
	for side in server client; do
		l=${GENAI_LABELS[$i]}
		i=$((i + 1))
		on=$(CG_EXTRA=NEMOLENS_HTTP=$side cg_instr B "http_$side" "$CG_N")
		off=$(CG_BOTH=NEMOLENS_GENAI=off CG_EXTRA=NEMOLENS_HTTP=$side cg_instr B "http_$side" "$CG_N")
		read -r diff status < <("$PY" -c "
import sys
on, off, n, lo, hi = sys.argv[1:]
if 'nan' in (on, off):
    print('nan n/a')
else:
    d = (float(on) - float(off)) / float(n)
    print(f'{d:+.1f}', 'pass' if float(lo) <= d <= float(hi) else 'miss')" "$on" "$off" "$CG_N" "$lo" "$hi")
		row 1 "$l" "$(f1 "$("$PY" -c "import sys; print(float(sys.argv[1]) / float(sys.argv[2]))" "$off" "$CG_N" 2>/dev/null || echo nan)") instr" \
			"$(f1 "$("$PY" -c "import sys; print(float(sys.argv[1]) / float(sys.argv[2]))" "$on" "$CG_N" 2>/dev/null || echo nan)") instr" \
			"$diff instr" "within ±10" "$status"
	done
}
