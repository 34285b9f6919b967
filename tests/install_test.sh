#!/bin/bash
# ctest install.outside_project: installs the library of a built tree, then builds and runs
# tests/install/, a project outside the tree, against the installed package only.
#   tests/install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail

build=$(cd "$1" && pwd)
source=$(cd "$2" && pwd)
parent=${TEST_TMPDIR:-/tmp}
tmp=$(mktemp -d "${parent%/}/install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# What the library was built with: its compiler (one C++ ABI) and the Torch it found.
cached() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
flags=(-G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=$tmp/prefix"
       "-DCMAKE_CXX_COMPILER=$(cached CMAKE_CXX_COMPILER)" "-DTorch_DIR=$(cached Torch_DIR)")
launcher=$(cached CCACHE_PROGRAM)
if [[ -n "$launcher" && "$launcher" != *NOTFOUND ]]; then
  flags+=("-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher")
fi

# A step under a time limit; its output is shown when it fails.
step() {
  local name=$1 limit=$2
  shift 2
  if ! timeout "$limit" "$@" >"$tmp/$name.log" 2>&1; then
    cat "$tmp/$name.log" >&2
    echo "install_test: $name failed: $*" >&2
    exit 1
  fi
}

step install 120 cmake --install "$build" --prefix "$tmp/prefix"
step configure 120 cmake -S "$source/tests/install" -B "$tmp/build" "${flags[@]}"
step build 300 cmake --build "$tmp/build" -j2
step run 300 "$tmp/build/outside" "$source/data/mnist" "$tmp/run"
cat "$tmp/run.log"
expected="outside.round_robin: Select called 2 times"
if ! grep -qxF "$expected" "$tmp/run.log"; then
  echo "install_test: the outside program did not print '$expected'" >&2
  exit 1
fi

# The Python package from the prefix alone (no build tree on the path).
site=$(find "$tmp/prefix/lib" -path '*-packages/fedprof/__init__.py' | head -n 1)
[[ -n "$site" ]] || { echo "install_test: no fedprof package under $tmp/prefix/lib" >&2; exit 1; }
step python 300 env -u PYTHONPATH PYTHONPATH="$(dirname "$(dirname "$site")")" /usr/bin/python3 -c "
import sys, fedprof
assert fedprof.__file__.startswith('$tmp/prefix/'), fedprof.__file__
run = fedprof.simulate(out='$tmp/python-run', rounds=1, clients__count=5, strategy__fraction=0.6,
                       data__name='mnist', data__dir='$source/data/mnist', data__train_limit=1000,
                       data__test_limit=200, train__epochs=1, partition__kind='iid', report__progress=False)
print('installed fedprof: accuracy', run.metrics['accuracy'][-1])
"
cat "$tmp/python.log"
