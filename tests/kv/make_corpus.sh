#!/bin/bash
# make_corpus.sh: captures real etcd answers into the seed corpus of the kv
# fuzz target (tests/fuzz/corpus/kv/).  Not part of make check; run it by
# hand after changing what the client asks etcd:
#   TMA_ETCD=$(command -v etcd) TMA_ETCDCTL=$(command -v etcdctl) tests/kv/make_corpus.sh
# Needs the curl program.  Each file is one selector byte (see fuzz_kv.c)
# followed by the answer exactly as etcd sent it.
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
out="$here/../fuzz/corpus/kv"
mkdir -p "$out"
etcd_start 1
E=${ETCD_URLS[0]}
b() { printf %s "$1" | base64 -w0; }
# save NAME SELECTOR [HTTPCODE] -- curl args...: POSTs and stores the answer.
save() {
  local name=$1 sel=$2; shift 2
  local f="$out/$name"
  printf "\\x$(printf %02x "$sel")" >"$f"
  if [ "$sel" = 6 ]; then
    local code=$1; shift
    printf "\\x$(printf %02x $(( (code - 100) & 255 )))\\x$(printf %02x $(( (code - 100) >> 8 )))" >>"$f"
  fi
  curl -s --max-time 3 "$@" >>"$f" || true
}
P() { curl -s "$E$1" -d "$2" >/dev/null; }

for i in 1 2 3; do P /v3/kv/put "{\"key\":\"$(b /tma/j/members/$i)\",\"value\":\"$(b "{\"addr\":\"10.0.0.$i:7000\"}")\"}"; done
L=$(curl -s "$E/v3/lease/grant" -d '{"TTL":30}' | python3 -c 'import json,sys;print(json.load(sys.stdin)["ID"])')
save lease-grant 4 "$E/v3/lease/grant" -d '{"TTL":30}'
save put-plain 1 "$E/v3/kv/put" -d "{\"key\":\"$(b /tma/j/agg)\",\"value\":\"$(b 7)\"}"
save put-leased-prev 1 "$E/v3/kv/put" -d "{\"key\":\"$(b /tma/j/members/1)\",\"value\":\"$(b up)\",\"lease\":\"$L\",\"prev_kv\":true}"
save range-one 0 "$E/v3/kv/range" -d "{\"key\":\"$(b /tma/j/members/1)\"}"
save range-empty 0 "$E/v3/kv/range" -d "{\"key\":\"$(b /nothing)\"}"
save range-page 0 "$E/v3/kv/range" -d "{\"key\":\"$(b /tma/j/members/)\",\"range_end\":\"$(b /tma/j/members0)\",\"limit\":\"2\"}"
save range-keys-only 0 "$E/v3/kv/range" -d "{\"key\":\"$(b /tma/j/)\",\"range_end\":\"$(b /tma/j0)\",\"keys_only\":true}"
save range-count-only 0 "$E/v3/kv/range" -d "{\"key\":\"$(b /tma/j/)\",\"range_end\":\"$(b /tma/j0)\",\"count_only\":true}"
save txn-create-ok 3 "$E/v3/kv/txn" -d "{\"compare\":[{\"target\":\"CREATE\",\"result\":\"EQUAL\",\"key\":\"$(b /tma/j/coordinator)\",\"create_revision\":\"0\"}],\"success\":[{\"request_put\":{\"key\":\"$(b /tma/j/coordinator)\",\"value\":\"$(b epoch=1)\"}},{\"request_range\":{\"key\":\"$(b /tma/j/coordinator)\"}}],\"failure\":[{\"request_range\":{\"key\":\"$(b /tma/j/coordinator)\"}}]}"
save txn-create-failed 3 "$E/v3/kv/txn" -d "{\"compare\":[{\"target\":\"CREATE\",\"result\":\"EQUAL\",\"key\":\"$(b /tma/j/coordinator)\",\"create_revision\":\"0\"}],\"success\":[{\"request_put\":{\"key\":\"$(b /tma/j/coordinator)\",\"value\":\"$(b epoch=2)\"}}],\"failure\":[{\"request_range\":{\"key\":\"$(b /tma/j/coordinator)\"}}]}"
save txn-delete 3 "$E/v3/kv/txn" -d "{\"compare\":[],\"success\":[{\"request_delete_range\":{\"key\":\"$(b /tma/j/agg)\",\"prev_kv\":true}}]}"
save delete-prefix-prev 2 "$E/v3/kv/deleterange" -d "{\"key\":\"$(b /tma/j/members/)\",\"range_end\":\"$(b /tma/j/members0)\",\"prev_kv\":true}"
save delete-none 2 "$E/v3/kv/deleterange" -d "{\"key\":\"$(b /nothing)\"}"
save lease-keepalive 4 "$E/v3/lease/keepalive" -d "{\"ID\":\"$L\"}"
save lease-ttl 4 "$E/v3/lease/timetolive" -d "{\"ID\":\"$L\",\"keys\":true}"
save lease-revoke 4 "$E/v3/lease/revoke" -d "{\"ID\":\"$L\"}"
save lease-keepalive-expired 4 "$E/v3/lease/keepalive" -d "{\"ID\":\"$L\"}"
save lease-ttl-expired 4 "$E/v3/lease/timetolive" -d "{\"ID\":\"$L\"}"
save error-lease-not-found 6 404 "$E/v3/lease/revoke" -d "{\"ID\":\"$L\"}"
save error-bad-json 6 400 "$E/v3/kv/put" -d '{garbage'
save error-future-rev 6 400 "$E/v3/kv/range" -d "{\"key\":\"$(b x)\",\"revision\":\"100000\"}"

# A watch: created, a put, a txn of two puts, a delete with prev_kv.
R=$(curl -s "$E/v3/kv/range" -d "{\"key\":\"$(b x)\"}" | python3 -c 'import json,sys;print(json.load(sys.stdin)["header"]["revision"])')
( sleep 0.5
  P /v3/kv/put "{\"key\":\"$(b /tma/j/stop)\",\"value\":\"$(b 1)\"}"
  P /v3/kv/txn "{\"success\":[{\"request_put\":{\"key\":\"$(b /tma/j/ready/1)\",\"value\":\"$(b y)\"}},{\"request_put\":{\"key\":\"$(b /tma/j/ready/2)\",\"value\":\"$(b y)\"}}]}"
  P /v3/kv/deleterange "{\"key\":\"$(b /tma/j/stop)\"}" ) &
wpid=$!
save watch-stream 5 -N --max-time 2 "$E/v3/watch" -d "{\"create_request\":{\"key\":\"$(b /tma/j/)\",\"range_end\":\"$(b /tma/j0)\",\"prev_kv\":true,\"start_revision\":\"$((R + 1))\"}}"
wait "$wpid"
curl -s "$E/v3/kv/compaction" -d "{\"revision\":\"$R\"}" >/dev/null
save watch-compacted 5 -N --max-time 1 "$E/v3/watch" -d "{\"create_request\":{\"key\":\"$(b /tma/j/)\",\"range_end\":\"$(b /tma/j0)\",\"start_revision\":\"2\"}}"

# Authentication: a user, a role, the token, a refusal and a denied watch.
etcdctl user add root:rootpw >/dev/null
etcdctl user add alice:apw >/dev/null
etcdctl role add r1 >/dev/null
etcdctl role grant-permission r1 --prefix=true readwrite /tma/ >/dev/null
etcdctl user grant-role alice r1 >/dev/null
etcdctl auth enable >/dev/null
save auth-token 7 "$E/v3/auth/authenticate" -d '{"name":"alice","password":"apw"}'
save error-auth-failed 6 400 "$E/v3/auth/authenticate" -d '{"name":"alice","password":"wrong"}'
save error-no-user 6 400 "$E/v3/kv/range" -d "{\"key\":\"$(b x)\"}"
save error-bad-token 6 401 -H "Authorization: bogus.1" "$E/v3/kv/range" -d "{\"key\":\"$(b /tma/x)\"}"
T=$(curl -s "$E/v3/auth/authenticate" -d '{"name":"alice","password":"apw"}' | python3 -c 'import json,sys;print(json.load(sys.stdin)["token"])')
save error-permission 6 403 -H "Authorization: $T" "$E/v3/kv/range" -d "{\"key\":\"$(b /other)\"}"
save watch-denied 5 -N --max-time 1 -H "Authorization: $T" "$E/v3/watch" -d "{\"create_request\":{\"key\":\"$(b /other)\"}}"
ls -l "$out"
