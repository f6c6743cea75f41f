#!/usr/bin/env bash
# Makes the certificates the TLS tests and the polling bench use, in DIR, with
# the `openssl` command (two days valid; EC P-256):
#   ca.pem / ca.key             a CA
#   other-ca.pem / other-ca.key another CA
#   trusted.pem / trusted.key   a server certificate of the CA for 127.0.0.1
#   stranger.pem / stranger.key a server certificate of the CA for broker.example
#   client.pem / client.key     a client certificate of the CA
#   intruder.pem / intruder.key a client certificate of the other CA
#   lapsed.pem / lapsed.key     a server certificate of the CA for 127.0.0.1,
#                               valid in January 2020 only
#   lapsed-client.pem / .key    a client certificate of the CA, the same
# Usage: scripts/make-test-certs.sh DIR
set -euo pipefail
dir=${1:?usage: make-test-certs.sh DIR}
mkdir -p "$dir"
cd "$dir"

key_args=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)

ca() {
    openssl req -x509 "${key_args[@]}" -keyout "$1.key" -out "$1.pem" -days 2 \
        -subj "/CN=$1" -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
}

# leaf NAME ISSUER EXTENSIONS
leaf() {
    openssl req "${key_args[@]}" -keyout "$1.key" -out "$1.csr" -subj "/CN=$1" 2>/dev/null
    printf '%b' "$3" > "$1.ext"
    openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -days 2 \
        -out "$1.pem" -extfile "$1.ext" 2>/dev/null
}

server='basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n'
client='basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n'
ca ca
ca other-ca
leaf trusted ca "${server}subjectAltName=IP:127.0.0.1\n"
leaf stranger ca "${server}subjectAltName=DNS:broker.example\n"
leaf client ca "$client"
leaf intruder other-ca "$client"

# lapsed NAME EXTENSIONS: a certificate of the CA valid on 1 January 2020 only
# (`openssl ca`, the one command of OpenSSL 3.0 that sets both dates).
: > index.txt
echo 01 > serial
printf '[ca]\ndefault_ca = test\n[test]\ndatabase = index.txt\nnew_certs_dir = .\nserial = serial\ndefault_md = sha256\npolicy = any\n[any]\ncommonName = supplied\n' > ca.cnf
lapsed() {
    openssl req "${key_args[@]}" -keyout "$1.key" -out "$1.csr" -subj "/CN=$1" 2>/dev/null
    printf '%b' "$2" > "$1.ext"
    openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -in "$1.csr" -out "$1.pem" \
        -startdate 20200101000000Z -enddate 20200102000000Z -extfile "$1.ext" -notext 2>/dev/null
}
lapsed lapsed "${server}subjectAltName=IP:127.0.0.1\n"
lapsed lapsed-client "$client"
