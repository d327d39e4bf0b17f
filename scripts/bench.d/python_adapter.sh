# SPDX-License-Identifier: Apache-2.0
# Section 9 of scripts/bench (sourced): the Python adapter's cost. Every run
# is under the shim; "without" is NEMOLENS_PYTHON=off, "with" the adapter.
section "9. Python adapter (the shim with NEMOLENS_PYTHON=off vs on)"
if [ "$MODE" = smoke ]; then PYA_PAIRS=1 PYA_N=20; else PYA_PAIRS=15 PYA_N=2000; fi
mkdir -p "$WORK/pya"
if [ -d "$B/nemolens-python" ] && "$PY" "$D/python_adapter.py" "$SO" "$WORK/pya" "$PYA_PAIRS" "$PYA_N" 2>"$WORK/pya.err"; then
	read -r a b d < <("$PY" "$D/stats.py" diffs "$WORK/pya/start")
	row 9 "python3 -c pass: CPU time" "$(f2 "$a") ms" "$(f2 "$b") ms" "$(d2 "$d") ms" "<= +2 ms" "$(check "$d" le 2)"
	read -r a b d < <("$PY" "$D/stats.py" diffs "$WORK/pya/aiohttp")
	row 9 "python3 -c 'import aiohttp': CPU time" "$(f2 "$a") ms" "$(f2 "$b") ms" "$(d2 "$d") ms" "<= +5 ms" "$(check "$d" le 5)"
	read -r a b d < <("$PY" "$D/stats.py" diffs "$WORK/pya/httpx")
	row 9 "python3 -c 'import httpx': CPU time" "$(f2 "$a") ms" "$(f2 "$b") ms" "$(d2 "$d") ms" "<= +5 ms" "$(check "$d" le 5)"
	read -r a b d < <("$PY" "$D/stats.py" diffs "$WORK/pya/queued")
	row 9 "aiohttp, every acquisition queued: CPU per request" "$(f1 "$a") us" "$(f1 "$b") us" "$(d1 "$d") us" "<= 20 us" "$(check "$d" le 20)"
else
	say "  $(tail -n 3 "$WORK/pya.err" 2>/dev/null | tr '\n' ' ')"
	na_row 9 "Python adapter" "measurement failed" ""
fi

# Instructions per request that gets a connection at once (callgrind): each
# client and library version with its two controls, no shim and the shim
# with NEMOLENS_PYTHON=off; the adapter's share is on - off, over off.
if [ "$MODE" = smoke ]; then PYC_N1=2 PYC_N2=4 PYC_ONLY=first; else PYC_N1=100 PYC_N2=1100 PYC_ONLY=; fi
if command -v valgrind >/dev/null && [ -d "$B/nemolens-python" ] &&
	"$PY" "$D/python_adapter_calls.py" "$SO" "$WORK/pya" "$PYC_N1" "$PYC_N2" $PYC_ONLY 2>"$WORK/pyc.err"; then
	while read -r client version none off on; do
		added=$("$PY" -c "import sys; off, on = map(float, sys.argv[1:]); print(f'{(on - off) / off * 100:.2f}')" "$off" "$on")
		row 9 "$client ($version), request on a free slot: instr" "$off instr" "$on instr" \
			"$(d2 "$added") % (no shim: $none)" "<= +1 %" "$(check "$added" le 1)"
	done <"$WORK/pya/calls"
else
	say "  $(tail -n 3 "$WORK/pyc.err" 2>/dev/null | tr '\n' ' ')"
	na_row 9 "Python adapter, request on a free slot: instr" "${PYC_ONLY:+smoke: }measurement failed or valgrind missing" ""
fi


# The event loop probe on an idle uvicorn server: CPU with the probe off
# and on (python_runtime.py), in % of one core.
if [ "$MODE" = smoke ]; then PYR_PAIRS=1 PYR_SECONDS=1; else PYR_PAIRS=3 PYR_SECONDS=20; fi
if [ -d "$B/nemolens-python" ] && read -r a b d < <("$PY" "$D/python_runtime.py" "$SO" "$PYR_PAIRS" "$PYR_SECONDS" 2>"$WORK/pyr.err"); then
	row 9 "idle uvicorn, event loop probe off vs on: CPU" "$(f3 "$a") % core" "$(f3 "$b") % core" \
		"$(d2 "$d") % of a core" "<= +0.5 %" "$(check "$d" le 0.5)"
else
	say "  $(tail -n 3 "$WORK/pyr.err" 2>/dev/null | tr '\n' ' ')"
	na_row 9 "idle uvicorn, event loop probe off vs on: CPU" "measurement failed" ""
fi
