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
# Keys are EC P-256 and readable by the owner only. Give each machine only
# ca.crt and its own certificate and key.
set -euo pipefail

if [ $# -lt 2 ] || ! [[ $2 =~ ^[0-9]+$ ]]; then
  echo "usage: $0 DIR N [SERVER_NAME ...]   (N = number of clients)" >&2
  exit 2
fi
dir=$1
n=$2
shift 2
command -v openssl >/dev/null || { echo "make-certs: openssl is not installed" >&2; exit 1; }

umask 077
mkdir -p "$dir"
cd "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# Signs $1.csr with the CA into $1.crt with the extensions in $2.
sign() {
  openssl x509 -req -in "$tmp/$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
    -out "$1.crt" -days 825 -sha256 -extfile "$2" 2>/dev/null
}

if [ ! -f ca.key ]; then
  key ca.key
  openssl req -x509 -new -key ca.key -out ca.crt -days 3650 -sha256 -subj "/CN=FedProf CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
fi

san="DNS:localhost,IP:127.0.0.1,IP:::1"
for name in "$@"; do
  if [[ $name =~ ^[0-9.]+$ || $name == *:* ]]; then san+=",IP:$name"; else san+=",DNS:$name"; fi
done
key server.key
openssl req -new -key server.key -out "$tmp/server.csr" -subj "/CN=fedprof-server"
printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=%s\n' \
  "$san" >"$tmp/server.ext"
sign server "$tmp/server.ext"

printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n' \
  >"$tmp/client.ext"
for ((k = 0; k < n; k++)); do
  key "client-$k.key"
  openssl req -new -key "client-$k.key" -out "$tmp/client-$k.csr" -subj "/CN=client-$k"
  sign "client-$k" "$tmp/client.ext"
done
chmod 644 ./*.crt
echo "make-certs: CA, server and $n client certificates in $(pwd)"
