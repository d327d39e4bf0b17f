# SPDX-License-Identifier: Apache-2.0
# Section 10 of scripts/bench (sourced): a scrape of nemolens-run's
# Prometheus endpoint for a tree of 100 processes (scrape.py).
section "10. Prometheus: a scrape of a tree of 100 processes"
if cmake --build "$B" --target nemolens-run steady_client >>"$WORK/build.log" 2>&1 &&
	"$PY" "$D/scrape.py" "$B/nemolens-run" "$B/tests/steady_client" "$MODE" >"$WORK/scrape.tsv" 2>"$WORK/scrape.err"; then
	while IFS=$'\t' read -r s f a b r t st; do
		row "$s" "$f" "$a" "$b" "$r" "$t" "$st"
	done <"$WORK/scrape.tsv"
else
	say "  scrape: $(tail -n 3 "$WORK/scrape.err" 2>/dev/null | tr '\n' ' ')"
	na_row 10 "scrape of /metrics, a tree of 100 processes" "scrape.py failed"
fi
