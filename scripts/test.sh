#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The test command: installs what is missing, then builds and runs every test.
#
#   1. gcc build: Criterion unit tests and all integration tests (real programs
#      under the real .so, checked against collectors and VictoriaMetrics);
#   2. clang build: must compile warning-free (-Werror), and a few programs
#      run under its .so;
#   3. ASan+UBSan and TSan builds of the .so: the integration tests again
#      (other projects' suites excepted, for time), and the threaded tests
#      of the lock-free pieces under TSan;
#   4. libFuzzer targets for every parser, each for a bounded time.
# Exits non-zero if any step fails; every runner's summary is printed.
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup-deps.sh || exit 1
jobs=$(nproc 2>/dev/null || echo 2)
failed=()

build() {   # build DIR [cmake args...]
	local dir=$1
	shift
	echo "== build $dir $*"
	cmake -S . -B "$dir" "$@" >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; return 1; }
	cmake --build "$dir" -j"$jobs" >"$dir.build.log" 2>&1 || { tail -50 "$dir.build.log"; return 1; }
}

summary=$(mktemp)
trap 'rm -f "$summary" "${others_failed:-}"' EXIT

run() {   # run NAME COMMAND...: runs a step, remembers a failure
	local name=$1
	shift
	echo
	echo "== $name"
	"$@" 2>&1 | tee -a "$summary"
	[ "${PIPESTATUS[0]}" -eq 0 ] || failed+=("$name")
}

mkdir -p build
build build -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo || exit 1

# The other four trees build on one core while the gcc build's tests run on
# the other (they mostly wait on their programs): that takes minutes off CI.
# Their output is shown when the tests are done.
others_failed=$(mktemp)
build_others() {
	jobs=1
	build build-clang -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo || echo "clang build" >>"$others_failed"
	build build-asan -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=Debug -DNEMOLENS_SANITIZE=address,undefined ||
		echo "asan build" >>"$others_failed"
	build build-tsan -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=Debug -DNEMOLENS_SANITIZE=thread ||
		echo "tsan build" >>"$others_failed"
	build build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DNEMOLENS_SANITIZE=address,undefined \
		-DNEMOLENS_FUZZ=ON -DNEMOLENS_FUZZ_SECONDS="${NEMOLENS_FUZZ_SECONDS:-12}" || echo "fuzz build" >>"$others_failed"
}
build_others >build-others.log 2>&1 &
others=$!

run "tests (gcc build)" ctest --test-dir build --output-on-failure
echo "Criterion:"
grep -h "Synthesis:" build/Testing/Temporary/LastTest.log | sed 's/^/  /'

wait "$others"
cat build-others.log
built() { ! grep -qx "$1" "$others_failed"; }
while read -r f; do failed+=("$f"); done <"$others_failed"

# The clang build: a few programs under its .so, so that a shim that clang
# compiles differently (a constructor folded away) cannot pass unseen.
if built "clang build"; then
	run "integration smoke tests (clang build)" ctest --test-dir build-clang --output-on-failure \
		-R 'integration[.]test_(connect_counts|lens|crash_report|crash_unchanged)$'
fi
if built "asan build"; then
	run "unit and integration tests (ASan+UBSan build)" ctest --test-dir build-asan --output-on-failure -L "unit|integration" -LE "real|no-sanitizer"
fi
if built "tsan build"; then
	run "integration and race tests (TSan build)" ctest --test-dir build-tsan --output-on-failure -L "integration|race" -LE "real|no-tsan|no-sanitizer"
fi
if built "fuzz build"; then
	run "fuzz targets" ctest --test-dir build-fuzz --output-on-failure -L fuzz
fi

echo
# One closing line over every ctest run: "N passed, N failed".
awk '/tests passed, [0-9]+ tests failed out of/ { f += $4; t += $NF } END { printf "tests: %d passed, %d failed\n", t - f, f }' "$summary"
if ((${#failed[@]})); then
	echo "FAILED: ${failed[*]}"
	exit 1
fi
