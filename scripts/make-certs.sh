#!/usr/bin/env bash
# The certificates and keys of a FedProf deployment with mutual TLS.
#
# Each client's private keys belong on its own machine: there the client runs
#   fedprof keygen --id K --out DIR
# and sends client-K.csr and client-K.secagg.pub to the certificate authority
# (the CA), which is not the server's operator:
#   scripts/make-certs.sh --ca DIR [SERVER_NAME ...]   once: the CA, the server's
#                                                      certificate, an empty roster
#   scripts/make-certs.sh --sign DIR FILE ...          each client-K.csr signed into
#                                                      client-K.crt, each
#                                                      client-K.secagg.pub listed in
#                                                      secagg-roster
# The CA hands each client back client-K.crt, ca.crt and secagg-roster, and the
# server its own certificate and key, ca.crt and secagg-roster.
#
# One machine (tests, loopback experiments), every key made here, so that
# whoever runs it holds every client's keys:
#   scripts/make-certs.sh DIR N [SERVER_NAME ...]
#
# DIR/ca.crt, ca.key          the certificate authority (keep ca.key offline)
# DIR/server.crt, server.key  the server's; valid for server.fedprof.invalid (the
#                             name every client and relay checks, whatever
#                             address it dials), localhost, 127.0.0.1, ::1 and
#                             each SERVER_NAME (a host name or an IP address)
# DIR/client-K.crt, .key      client K = 0 .. N-1, subject CN=client-K: the
#                             server takes the client's id from it, and only
#                             from a subject of exactly one such CN, K in
#                             canonical decimal (client-01 is refused)
# DIR/relay-R.crt, .key       with RELAYS=M in the environment, relays R = 0 .. M-1
#                             (fedprof relay --id R), CN=relay-R: a client of the
#                             server and a server to its own clients, valid for
#                             relay-R.fedprof.invalid alone (its clients check
#                             it with fedprof client --relay R): never for the
#                             server's names, so a relay's key cannot pose as
#                             the server
# DIR/operator-NAME.crt, .key with OPERATORS=alice,bob in the environment, each
#                             operator's certificate for a federation (fedprof
#                             federation ...), CN=operator-NAME: the only
#                             certificates whose calls submit, stop, fetch,
#                             enrol or revoke (NAME: 1 to 32 of a-z 0-9 - _)
# DIR/client-K.secagg.key     client K's Ed25519 key for secure aggregation's
#                             signatures (secagg.protocol)
# DIR/secagg-roster           every client's secure aggregation verification
#                             key, "K KEY" a line (KEY: base64 of its
#                             SubjectPublicKeyInfo): clients check the keys the
#                             server hands out against it, so a server cannot
#                             pass a key of its own off as a client's
# DIR/server.dp.key,          one machine only: the DP noise keys of the server
# DIR/client-K.dp.key         and of each client (dp.noise = keyed); on separate
#                             machines each party makes its own with fedprof
#                             keygen, and no one else ever holds it
# Keys are EC P-256 (Ed25519 for secure aggregation) and readable by the owner
# only.
set -euo pipefail

die() { echo "make-certs: $*" >&2; exit 1; }
usage() {
  echo "usage: $0 DIR N [SERVER_NAME ...]     (one machine: N clients' keys made here)" >&2
  echo "       $0 --ca DIR [SERVER_NAME ...]  (the CA and the server's certificate)" >&2
  echo "       $0 --sign DIR FILE ...         (client-K.csr and client-K.secagg.pub from fedprof keygen)" >&2
  exit 2
}
command -v openssl >/dev/null || die "openssl is not installed"
OPERATORS=${OPERATORS:-}
for operator in ${OPERATORS//,/ }; do
  [[ $operator =~ ^[a-z0-9_-]{1,32}$ ]] || die "OPERATORS: '$operator' is not 1 to 32 of a-z 0-9 - _"
done
if ! [[ ${RELAYS:-0} =~ ^[0-9]+$ ]]; then
  echo "make-certs: RELAYS=${RELAYS} is not a number of relays" >&2
  exit 2
fi

mode=one-machine
case ${1:-} in
  --ca) mode=ca; shift ;;
  --sign) mode=sign; shift ;;
esac
[ $# -ge 1 ] || usage
dir=$1
shift
n=0
if [ "$mode" = one-machine ]; then
  [ $# -ge 1 ] && [[ $1 =~ ^[0-9]+$ ]] || usage
  n=$1
  shift
fi
[ "$mode" != sign ] || [ $# -ge 1 ] || usage

umask 077
mkdir -p "$dir"
# Files named on the command line are read from where they were named.
files=()
for f in "$@"; do
  if [ "$mode" = sign ]; then files+=("$(cd "$(dirname "$f")" && pwd)/$(basename "$f")"); fi
done
cd "$dir"

# One openssl call per certificate: a new P-256 key, its certificate signed by
# the CA (OpenSSL 3's req -CA), about 17 ms each (docs/deploy-bench.md).
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

# A DP noise key (dp.noise = keyed): 32 random bytes as 64 hex digits.
dp_key() {
  [ -f "$1" ] || openssl rand -hex 32 >"$1"
}

# The roster's lines "K KEY" from files, sorted, each id and each key once.
write_roster() {
  sort -n -k1,1 "$@" >secagg-roster.new
  local twice
  twice=$(cut -d' ' -f1 secagg-roster.new | uniq -d | head -1)
  if [ -n "$twice" ]; then
    rm -f secagg-roster.new
    die "secagg-roster would name client $twice twice"
  fi
  if [ -n "$(cut -d' ' -f2 secagg-roster.new | sort | uniq -d)" ]; then
    rm -f secagg-roster.new
    die "secagg-roster would list one key for two clients"
  fi
  mv secagg-roster.new secagg-roster
  chmod 644 secagg-roster
}

# A file's client id from its name client-K.EXT, canonical decimal, or failure.
client_of() {
  local name
  name=$(basename "$1" "$2")
  [[ $name =~ ^client-(0|[1-9][0-9]{0,8})$ ]] || die "$1: not named client-K$2 (K in canonical decimal)"
  echo "${BASH_REMATCH[1]}"
}

make_ca_and_server() {
  if [ ! -f ca.key ]; then
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ca.key 2>/dev/null
    openssl req -x509 -new -key ca.key -out ca.crt -days 3650 -sha256 -subj "/CN=FedProf CA" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
  fi
  local san="DNS:server.fedprof.invalid,DNS:localhost,IP:127.0.0.1,IP:::1"
  for name in "$@"; do
    if [[ $name =~ ^[0-9.]+$ || $name == *:* ]]; then san+=",IP:$name"; else san+=",DNS:$name"; fi
  done
  issue server "/CN=fedprof-server" -addext "extendedKeyUsage=serverAuth" -addext "subjectAltName=$san"
  for ((r = 0; r < ${RELAYS:-0}; r++)); do
    issue "relay-$r" "/CN=relay-$r" -addext "extendedKeyUsage=serverAuth,clientAuth" \
      -addext "subjectAltName=DNS:relay-$r.fedprof.invalid"
  done
  local operator
  for operator in ${OPERATORS//,/ }; do
    issue "operator-$operator" "/CN=operator-$operator" -addext "extendedKeyUsage=clientAuth"
  done
}

case $mode in
  one-machine)
    make_ca_and_server "$@"
    dp_key server.dp.key
    # The clients' certificates on every core, 200 to a shell (a shell per
    # certificate cost as much as its openssl).
    # Their DP keys from one openssl call a shell.
    export -f issue secagg_key
    seq 0 $((n - 1)) | xargs -r -P "$(nproc)" -n 200 \
      bash -c 'keys=$(openssl rand -hex $((32 * $#))); i=0
               for k; do
                 issue "client-$k" "/CN=client-$k" -addext "extendedKeyUsage=clientAuth"; secagg_key "$k"
                 [ -f "client-$k.dp.key" ] || echo "${keys:$((64 * i)):64}" >"client-$k.dp.key"
                 i=$((i + 1))
               done' _
    if ((n > 0)) && { [ ! -s "client-$((n - 1)).crt" ] || [ ! -s "client-$((n - 1)).secagg.key" ]; }; then
      die "could not write the client certificates"
    fi
    pubs=(client-*.secagg.pub)
    [ -e "${pubs[0]}" ] || pubs=()
    write_roster "${pubs[@]}" /dev/null
    rm -f client-*.secagg.pub
    if [ "$(wc -l <secagg-roster)" -ne "$n" ] || grep -qv '^[0-9]* MC' secagg-roster; then
      die "could not write secagg-roster"
    fi
    find . -maxdepth 1 -name '*.crt' -exec chmod 644 {} +
    echo "make-certs: CA, server, ${RELAYS:-0} relay, $(wc -w <<<"${OPERATORS//,/ }") operator and $n client certificates in $(pwd) (one machine: every key is here)"
    ;;
  ca)
    make_ca_and_server "$@"
    [ -f secagg-roster ] || write_roster /dev/null
    find . -maxdepth 1 -name '*.crt' -exec chmod 644 {} +
    echo "make-certs: CA and server certificate in $(pwd); sign the clients' requests with --sign"
    ;;
  sign)
    [ -f ca.key ] || die "no CA in $(pwd) (make-certs.sh --ca $(pwd) first)"
    [ -f secagg-roster ] || write_roster /dev/null
    lines=()
    signed=0
    for f in "${files[@]}"; do
      [ -f "$f" ] || die "$f: no such file"
      case $f in
        *.csr)
          k=$(client_of "$f" .csr)
          # The request's own signature (its key is the one it certifies),
          # and a subject of exactly CN=client-K.
          openssl req -in "$f" -noout -verify >/dev/null 2>&1 || die "$f: not a certificate request whose signature verifies"
          subject=$(openssl req -in "$f" -noout -subject -nameopt RFC2253 2>/dev/null)
          [ "$subject" = "subject=CN=client-$k" ] || die "$f: its subject is '${subject#subject=}', not CN=client-$k"
          openssl x509 -req -in "$f" -CA ca.crt -CAkey ca.key -days 825 -sha256 \
            -set_serial "0x$(openssl rand -hex 16)" -out "client-$k.crt" \
            -extfile <(printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n') \
            2>/dev/null || die "$f: could not be signed"
          chmod 644 "client-$k.crt"
          signed=$((signed + 1))
          ;;
        *.secagg.pub)
          k=$(client_of "$f" .secagg.pub)
          read -r id key rest <"$f" || true
          [ "$id" = "$k" ] && [ -z "${rest:-}" ] && [ -n "${key:-}" ] || die "$f: not the line '$k KEY'"
          echo "$key" | openssl base64 -d -A 2>/dev/null | openssl pkey -pubin -inform DER -noout -text 2>/dev/null |
            grep -q '^ED25519 Public-Key' || die "$f: not an Ed25519 public key"
          if grep -q "^$k " secagg-roster; then
            grep -qx "$k $key" secagg-roster || die "$f: secagg-roster already lists another key for client $k"
            continue
          fi
          lines+=("$k $key")
          ;;
        *) die "$f: not a client-K.csr or client-K.secagg.pub from fedprof keygen" ;;
      esac
    done
    printf '%s\n' "${lines[@]}" | sed '/^$/d' >roster.add
    write_roster secagg-roster roster.add
    rm -f roster.add
    echo "make-certs: signed $signed certificate requests and listed ${#lines[@]} keys in $(pwd)/secagg-roster"
    ;;
esac
