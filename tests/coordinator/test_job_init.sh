#!/bin/bash
# test_job_init.sh: "init" in a job config starts round 0 from saved
# weights: a launched job's round-0 checkpoint holds exactly the weights of
# the file (a tma train run's best.tmaw); weights of another model are
# refused with exit 2 naming the field that differs, by tma launch before
# any role starts (leaving no run folder) and by tma coordinator alone; a
# missing file is exit 1 naming it and the key, a damaged one exit 1 naming
# the check that failed.
source "$TMA_SRCDIR/tests/lib.sh"
source "$TMA_SRCDIR/tests/coordinator/dist_lib.sh"
cd "$TMP_ROOT"
make_graph g.tmag
cat > model.json <<JSON
{"model": {"hidden": 16, "decoder_hidden": 16}, "train": {"batch_size": 64, "threads": 1, "seed": 5}}
JSON
"$TMA" train g.tmag --config model.json --steps 20 --eval-every-seconds 1000 -q -o trained > /dev/null ||
  fail "tma train (the weights to start from)"
job() { # NAME INIT HIDDEN
  cat > $1.json <<JSON
{"job": "$1", "workers": 2, "graph": "g.tmag", "init": "$2",
 "aggregation": {"interval_steps": 3}, "duration": {"rounds": 1},
 "model": {"hidden": $3, "decoder_hidden": 16},
 "train": {"batch_size": 64, "threads": 1, "seed": 9}, "eval": {"threads": 1}}
JSON
}
job warm trained/best.tmaw 16
timeout 300 "$TMA" launch warm.json -o warm -q > warm.out 2>&1 || { cat warm.out >&2; fail "tma launch with init"; }
check_run warm > /dev/null || fail "run folder of the job with init invalid"
[ "$(json warm/job.json 'd["init"]')" = "$TMP_ROOT/trained/best.tmaw" ] ||
  fail "job.json does not name the init weights by their absolute path"
r0=$(ls warm/checkpoint-r000000-e*.tmaw) || fail "no checkpoint of round 0 kept"
python3 - "$r0" trained/best.tmaw <<'PY' || fail "round 0 does not start from the init weights"
import struct, sys
def block(path):
    # docs/model.md: the 128-byte header (the parameter count at 24), the model section, then the block.
    b = open(path, "rb").read()
    count, = struct.unpack_from("<Q", b, 24)
    return b[len(b) - 4 * count:]
a, b = block(sys.argv[1]), block(sys.argv[2])
if a != b:
    sys.exit("round 0's %d bytes of weights differ from the init file's %d" % (len(a), len(b)))
PY

# Another model: refused before any role starts, naming the field.
job other trained/best.tmaw 32
expect_fail 2 "another model: hidden is 16 there, 32 here" -- "$TMA" launch other.json -o other -q
grep -q '"init"' "$TMP_ROOT/stderr.$$" || fail "the refusal does not name the key \"init\""
[ ! -e other ] || fail "a refused init left the run folder"
# tma coordinator alone (a cluster) refuses it the same way.
etcd_start 1
"$TMA" partition g.tmag --scheme random --shards 2 -o part > /dev/null || fail "partition"
python3 - other.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["partition"] = {"dir": "part"}
json.dump(c, open(sys.argv[1], "w"))
PY
expect_fail 2 "another model: hidden is 16 there, 32 here" -- \
  timeout 60 "$TMA" coordinator --etcd "$ETCD_ENDPOINTS" --config other.json --run-dir other-run
# Missing and damaged files.
job gone nope.tmaw 16
expect_fail 1 "nope.tmaw .*\"init\" in .*gone.json" -- "$TMA" launch gone.json -o gone -q
[ ! -e gone ] || fail "a missing init file left a run folder"
cp trained/best.tmaw bad.tmaw
printf 'x' | dd of=bad.tmaw bs=1 seek=$(($(stat -c %s bad.tmaw) - 10)) conv=notrunc 2> /dev/null
job bad bad.tmaw 16
expect_fail 1 "bad.tmaw: the parameter block's checksum" -- "$TMA" launch bad.json -o bad -q
echo "init: round 0 holds the given weights; another model refused naming the field; missing and damaged files named"
