#!/usr/bin/env bash
# The test command: installs what is missing, builds with gcc and clang, and
# runs every test (Criterion unit tests and integration tests under the real
# .so) through ctest. Exit status is ctest's.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup-deps.sh

jobs=$(nproc 2>/dev/null || echo 2)

# clang must also compile everything warning-free (-Werror); tests run on the gcc build.
echo "== build (clang, -Wall -Wextra -Werror)"
cmake -S . -B build-clang -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-clang -j"$jobs" >/dev/null

echo "== build (gcc, -Wall -Wextra -Werror)"
cmake -S . -B build -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs" >/dev/null

echo "== tests"
cd build
ctest --output-on-failure --timeout 300 "$@"
