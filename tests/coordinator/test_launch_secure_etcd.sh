#!/bin/bash
# test_launch_secure_etcd.sh: the cluster recipe of docs/security.md.  An
# external etcd that speaks only TLS, requires client certificates and has
# authentication on (certificates made here with openssl; a user "tma" whose
# role may use /tma/ only), and a job whose token is in a 0600 token file:
# tma launch --etcd https://... with the CA, certificate, key, user and
# password file finishes the job; the password never appears on a role's
# command line and the token nowhere in the run folder or etcd.  A password
# over plain http is refused (by launch and by the roles) unless
# --insecure-etcd is given.
source "$TMA_SRCDIR/tests/coordinator/dist_lib.sh"
need openssl openssl
cd "$TMP_ROOT"

# Certificates: a CA, the server (127.0.0.1), a client without a Common Name
# (etcd 3.4's gateway refuses client certificates with one once auth is on).
key="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' > server.ext
printf 'extendedKeyUsage=clientAuth\n' > client.ext
{
  openssl req -x509 $key -keyout ca.key -out ca.pem -days 2 -subj /CN=tma-test-ca &&
  openssl req $key -keyout server.key -out server.csr -subj /CN=127.0.0.1 &&
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile server.ext &&
  openssl req $key -keyout client.key -out client.csr -subj /O=tma-test &&
  openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2 -extfile client.ext
} > openssl.log 2>&1 || { cat openssl.log >&2; hard "making the certificates failed"; }

# etcd: TLS only, client certificates required.
ports=($(_etcd_free_ports 2))
URL=https://127.0.0.1:${ports[0]}
"$TMA_ETCD" --name s --data-dir etcd-data --listen-client-urls "$URL" --advertise-client-urls "$URL" \
  --listen-peer-urls "http://127.0.0.1:${ports[1]}" --initial-advertise-peer-urls "http://127.0.0.1:${ports[1]}" \
  --initial-cluster "s=http://127.0.0.1:${ports[1]}" --cert-file server.pem --key-file server.key \
  --client-cert-auth --trusted-ca-file ca.pem --logger zap --log-outputs stderr --log-level warn > etcd.log 2>&1 &
track $!
ectl() { ETCDCTL_API=3 "$TMA_ETCDCTL" --endpoints "$URL" --cacert ca.pem --cert client.pem --key client.key \
  --dial-timeout 2s --command-timeout 5s "$@"; }
wait_for 60 ectl endpoint health || { cat etcd.log >&2; hard "the TLS etcd did not become healthy"; }
# Users: root (required to turn auth on) and tma, whose role reaches /tma/ only.
umask 077
head -c 24 /dev/urandom | base64 > root.pw
head -c 24 /dev/urandom | base64 > tma.pw
ectl user add "root:$(cat root.pw)" >/dev/null && ectl user add "tma:$(cat tma.pw)" >/dev/null &&
  ectl role add tma-jobs >/dev/null && ectl role grant-permission tma-jobs --prefix=true readwrite /tma/ >/dev/null &&
  ectl user grant-role tma tma-jobs >/dev/null && ectl auth enable >/dev/null || hard "setting up etcd auth failed"
# The job token in a file of this user's alone.
head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' > job.token
umask 022
cat > job.json <<JSON
{"job": "tls", "generate": {"kind": "sbm", "nodes": 2000, "classes": 20, "avg_degree": 8, "feat_dim": 16,
  "seed": 1, "val": 100, "test": 100},
 "workers": 2, "aggregation": {"interval_steps": 8}, "duration": {"rounds": 4},
 "transport": {"token_file": "job.token"},
 "model": {"hidden": 16, "decoder_hidden": 16}, "train": {"batch_size": 128, "threads": 1}}
JSON
SECURE=(--etcd "$URL" --etcd-ca ca.pem --etcd-cert client.pem --etcd-key client.key --etcd-user tma
        --etcd-password-file tma.pw)

# The job runs; while it trains, no command line carries the password.
export TMA_FAULT=delay_step=0.05
"$TMA" launch job.json -o run -q "${SECURE[@]}" > out.txt 2>&1 &
lpid=$!
track $lpid
wait_for 120 grep -Eq "round +1 \|" run/logs/coordinator.log || { cat out.txt >&2; fail "the job did not start training"; }
ps -eo args | grep -F -- "$(cat tma.pw)" | grep -v grep && fail "the etcd password is on a command line"
ps -eo args | grep -q -- "worker --etcd $URL --etcd-ca" || fail "the workers did not get the etcd TLS flags"
wait_exit $lpid 180; rc=$?
[ "$rc" -eq 0 ] || { cat out.txt >&2; dump_logs run/logs/coordinator.log run/logs/worker-0.log; fail "the job exited $rc"; }
check_run run >/dev/null || fail "run folder invalid"
grep -rlF "$(cat job.token)" run && fail "the token is written in the run folder"
ectl --user "root:$(cat root.pw)" get /tma/tls/config --print-value-only | grep -q '"token":"(hidden)"' ||
  fail "etcd's config key does not hide the token from the token file"
ectl --user "root:$(cat root.pw)" get /tma/tls/config --print-value-only | grep -qF "$(cat job.token)" &&
  fail "the token is in etcd"

# A password over plain http: refused, unless --insecure-etcd.
expect_fail 2 "refusing to send the etcd password over plain http" -- \
  "$TMA" launch job.json -o run2 --etcd http://127.0.0.1:1 --etcd-user tma --etcd-password-file tma.pw
[ ! -e run2 ] || fail "a refused launch made a run folder"
expect_fail 2 "refusing to send the etcd password over plain http" -- \
  env TMA_ETCD_PASSWORD=x "$TMA" worker --etcd http://127.0.0.1:1 --etcd-user tma --job tls
expect_fail 1 "127.0.0.1:1" -- env TMA_ETCD_PASSWORD=x "$TMA" status --etcd http://127.0.0.1:1 --etcd-user tma \
  --insecure-etcd --job tls --etcd-timeout 1
expect_fail 2 "for an etcd given with --etcd" -- "$TMA" launch job.json --etcd-ca ca.pem
echo "launch: a job on a TLS-only etcd with client certificates and authentication; plain-http passwords refused"
