# SPDX-License-Identifier: Apache-2.0
# Section 8 of scripts/bench (sourced): out of the program's way. fork() and
# exit under a collector that never answers, start-up (python3 -c pass), the
# CPU to spawn /bin/true (with an empty .so preloaded as the floor), RSS,
# threads and sockets of an idle program, in both modes: plain LD_PRELOAD
# and nemolens-run (which exports for its tree). The figures are measured
# by oow.py; this turns its lines into rows.
section "8. out of the program's way (plain LD_PRELOAD and nemolens-run)"
if cmake --build "$B" --target nemolens-run >>"$WORK/build.log" 2>&1 &&
	printf 'int nl_bench_empty;\n' | gcc -shared -fPIC -x c -o "$WORK/empty.so" - 2>>"$WORK/cc.log" &&
	"$PY" "$D/oow.py" "$SO" "$B/nemolens-run" "$WORK/empty.so" "$OTLP_URL" "$MODE" >"$WORK/oow.tsv" 2>"$WORK/oow.err"; then
	while IFS=$'\t' read -r s f a b r t st; do
		row "$s" "$f" "$a" "$b" "$r" "$t" "$st"
	done <"$WORK/oow.tsv"
else
	say "  oow: $(tail -n 3 "$WORK/oow.err" 2>/dev/null | tr '\n' ' ')"
	na_row 8 "out of the program's way" "nemolens-run or oow.py failed"
fi
