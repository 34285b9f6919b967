#!/usr/bin/env bash
# Writes the certificates of a FedProf deployment with mutual TLS:
#   scripts/make-certs.sh DIR N [SERVER_NAME ...]
# DIR/ca.crt, ca.key          the certificate authority (keep ca.key offline)
# DIR/server.crt, server.key  the server's; valid for localhost, 127.0.0.1, ::1
#                             and each SERVER_NAME (a host name or an IP address)
# DIR/client-K.crt, .key      client K = 0 .. N-1, subject CN=client-K: the
#                             server takes the client's id from it, and only
#                             from a subject of exactly one such CN, K in
#                             canonical decimal (client-01 is refused)
# DIR/relay-R.crt, .key       with RELAYS=M in the environment, relays R = 0 .. M-1
#                             (fedprof relay --id R), CN=relay-R: a client of the
#                             server and a server to its own clients, valid for
#                             the same names as the server
# DIR/client-K.secagg.key     client K's Ed25519 key for secure aggregation's
#                             signatures (secagg.protocol)
# DIR/secagg-roster           every client's secure aggregation verification
#                             key, "K KEY" a line (KEY: base64 of its
#                             SubjectPublicKeyInfo): clients check the keys the
#                             server hands out against it, so a server cannot
#                             pass a key of its own off as a client's
# Keys are EC P-256 (Ed25519 for secure aggregation) and readable by the owner
# only. Give each machine only ca.crt, secagg-roster and its own certificate
# and keys.
set -euo pipefail

if [ $# -lt 2 ] || ! [[ $2 =~ ^[0-9]+$ ]]; then
  echo "usage: $0 DIR N [SERVER_NAME ...]   (N = number of clients)" >&2
  exit 2
fi
if ! [[ ${RELAYS:-0} =~ ^[0-9]+$ ]]; then
  echo "make-certs: RELAYS=${RELAYS} is not a number of relays" >&2
  exit 2
fi
dir=$1
n=$2
shift 2
command -v openssl >/dev/null || { echo "make-certs: openssl is not installed" >&2; exit 1; }

umask 077
mkdir -p "$dir"
cd "$dir"

# One openssl call per certificate: a new P-256 key, its certificate signed by
# the CA (OpenSSL 3's req -CA), so that 10,000 clients take about a minute.
# $1: file stem, $2: subject, then -addext extensions.
issue() {
  local stem=$1 subject=$2
  shift 2
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$stem.key" \
    -out "$stem.crt" -subj "$subject" -CA ca.crt -CAkey ca.key -days 825 -sha256 \
    -addext "basicConstraints=CA:FALSE" -addext "keyUsage=critical,digitalSignature" "$@" 2>/dev/null
}

# Client $1's secure aggregation key, and its roster line in client-$1.secagg.pub.
secagg_key() {
  openssl genpkey -algorithm ed25519 -out "client-$1.secagg.key" 2>/dev/null
  echo "$1 $(openssl pkey -in "client-$1.secagg.key" -pubout 2>/dev/null | sed -n 2p)" >"client-$1.secagg.pub"
}

if [ ! -f ca.key ]; then
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ca.key 2>/dev/null
  openssl req -x509 -new -key ca.key -out ca.crt -days 3650 -sha256 -subj "/CN=FedProf CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
fi

san="DNS:localhost,IP:127.0.0.1,IP:::1"
for name in "$@"; do
  if [[ $name =~ ^[0-9.]+$ || $name == *:* ]]; then san+=",IP:$name"; else san+=",DNS:$name"; fi
done
issue server "/CN=fedprof-server" -addext "extendedKeyUsage=serverAuth" -addext "subjectAltName=$san"
for ((r = 0; r < ${RELAYS:-0}; r++)); do
  issue "relay-$r" "/CN=relay-$r" -addext "extendedKeyUsage=serverAuth,clientAuth" \
    -addext "subjectAltName=$san"
done
# The clients' certificates on every core, 200 to a shell (a shell per
# certificate cost as much as its openssl).
export -f issue secagg_key
seq 0 $((n - 1)) | xargs -r -P "$(nproc)" -n 200 \
  bash -c 'for k; do issue "client-$k" "/CN=client-$k" -addext "extendedKeyUsage=clientAuth"; secagg_key "$k"; done' _
if ((n > 0)) && { [ ! -s "client-$((n - 1)).crt" ] || [ ! -s "client-$((n - 1)).secagg.key" ]; }; then
  echo "make-certs: could not write the client certificates" >&2
  exit 1
fi
find . -maxdepth 1 -name 'client-*.secagg.pub' -exec cat {} + | sort -n >secagg-roster
find . -maxdepth 1 -name 'client-*.secagg.pub' -delete
if [ "$(wc -l <secagg-roster)" -ne "$n" ] || grep -qv '^[0-9]* MC' secagg-roster; then
  echo "make-certs: could not write secagg-roster" >&2
  exit 1
fi
find . -maxdepth 1 \( -name '*.crt' -o -name secagg-roster \) -exec chmod 644 {} +
echo "make-certs: CA, server, ${RELAYS:-0} relay and $n client certificates in $(pwd)"
