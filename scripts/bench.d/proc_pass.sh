# SPDX-License-Identifier: Apache-2.0
# Section 11 of scripts/bench (sourced): the process figures (process.cpu.time
# and the rest), one pass of nemolens-run's sampler over a tree of 100 and of
# 1,000 processes (proc_pass.c). The target is the sampler's budget: at most
# 1 % of one core at the default export interval (10 s), 100 ms of CPU a pass.
section "11. process figures: one pass over a tree"
for n in 100 1000; do
	label="process figures: one sample of a tree of $n processes"
	[ "$n" = 1000 ] && label="process figures: one sample of a tree of 1,000 processes"
	rounds=21
	[ "$MODE" = smoke ] && rounds=3
	if out=$("$BIN/proc_pass" "$SO" "$n" "$rounds" 2>"$WORK/proc_pass.err"); then
		read -r _ _ _ sampled _ med _ max <<<"$out"
		row 11 "$label" "-" "$sampled processes" \
			"$(f2 "$(echo "$med/1000" | bc -l)") ms CPU (slowest $(f2 "$(echo "$max/1000" | bc -l)")), $(f1 "$(echo "$med/$n" | bc -l)") us/process" \
			"<= 100 ms CPU" "$(check "$med" le 100000)"
	else
		say "  proc_pass: $(tail -n 2 "$WORK/proc_pass.err" 2>/dev/null | tr '\n' ' ')"
		na_row 11 "$label" "proc_pass failed" "<= 100 ms CPU"
	fi
done
