#!/bin/bash
# test_ogb_eval.sh: tma's MRR and Hits@K (both tie rules) against the `ogb`
# package's own Evaluator on the same scores, with many ties.  The ogb
# package lives in a virtual env over Debian's torch, numpy, pandas and
# scikit-learn, which .ci/run creates at .ci/ogb-venv (TMA_OGB_PYTHON points
# elsewhere).
. "$TMA_SRCDIR/tests/lib.sh"
OGB_PY=${TMA_OGB_PYTHON:-$TMA_SRCDIR/.ci/ogb-venv/bin/python}
[ -x "$OGB_PY" ] ||
  skip "no python with the ogb package at $OGB_PY: .ci/run creates it (/usr/bin/python3 -m venv --system-site-packages .ci/ogb-venv; .ci/ogb-venv/bin/pip install --no-deps ogb==1.3.6), or set TMA_OGB_PYTHON"
export OUTDATED_IGNORE=1
timeout 120 "$OGB_PY" -c 'from ogb.linkproppred import Evaluator' ||
  fail "$OGB_PY cannot import ogb.linkproppred (python3-pandas, python3-sklearn, python3-six, python3-tqdm, python3-torch from .ci/packages-test)"
PY=$TMA_SRCDIR/tests/gnn/ogb_eval.py
RANK=$TMA_BUILDDIR/tests/gnn/ogb_rank
cd "$TMP_ROOT" || hard "cd"
ROWS=3000 PER=1001
timeout 120 "$OGB_PY" "$PY" scores scores.f32 $ROWS $PER || hard "writing scores"
"$RANK" scores.f32 $ROWS $PER pessimistic 1,3,10,50,100 > pess.json || fail "ogb_rank pessimistic"
"$RANK" scores.f32 $ROWS $PER mean 1,3,10,50,100 > mean.json || fail "ogb_rank mean"
timeout 120 "$OGB_PY" "$PY" compare scores.f32 $ROWS $PER pess.json mean.json || fail "tma and ogb disagree"
