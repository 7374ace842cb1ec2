#!/bin/bash
# test_python.sh: the Python package in python/ with Debian's Python and
# numpy: its unit checks against the tma program (test_tma_py.py), `pip
# install ./python` into a folder with no compiler and no network, the
# worked example of docs/python.md run as written, and Ctrl-C: a SIGINT to
# a Python program inside tma.train stops tma train as on the command line
# (it writes its result, stopped "interrupted") and raises KeyboardInterrupt.
. "$TMA_SRCDIR/tests/lib.sh"
PY=/usr/bin/python3
need_py "$PY" numpy python3-numpy
need_py "$PY" pip python3-pip
need_py "$PY" setuptools python3-setuptools
cd "$TMP_ROOT" || hard "cd"
export TMA_BIN PYTHONDONTWRITEBYTECODE=1
"$TMA_BUILDDIR/tests/gnn/write_test_graph" g.tmag 300 12 0 3 || hard "cannot write the test graph"

# pip install ./python (offline, no build isolation: Debian's setuptools).
# (From a copy: setuptools writes build/ and *.egg-info beside the sources.)
cp -r "$TMA_SRCDIR/python" pkg && chmod -R u+w pkg || hard "cannot copy python/"
"$PY" -m pip install --no-build-isolation --no-deps --no-index --quiet --target site ./pkg \
  > pip.out 2>&1 || { cat pip.out; fail "pip install ./python failed"; }
[ -f site/tma/__init__.py ] || fail "pip install put no tma package in site/"
export PYTHONPATH=$TMP_ROOT/site
"$PY" -c "import tma, sys; sys.exit(0 if tma.__file__.startswith('$TMP_ROOT/site') else 1)" ||
  fail "the installed package is not the one imported"

"$PY" "$TMA_SRCDIR/tests/python/test_tma_py.py" || fail "test_tma_py.py"

# The worked example of docs/python.md, every python block in order, as written.
mkdir example && cd example || hard "cd example"
"$PY" - "$TMA_SRCDIR/docs/python.md" > blocks.py <<'PY'
import re, sys
text = open(sys.argv[1]).read()
blocks = re.findall(r"```python\n(.*?)```", text, re.S)
assert blocks, "no python block in docs/python.md"
print("\n".join(blocks))
PY
"$PY" blocks.py > example.out 2>&1 || { cat example.out; fail "the worked example of docs/python.md failed"; }
cd ..

# Ctrl-C inside tma.train.
# (A shell's background job starts with SIGINT ignored: Python's handler is
# put back, as it is in a terminal.)
"$PY" -c "
import signal, tma
signal.signal(signal.SIGINT, signal.default_int_handler)
try:
    tma.train('g.tmag', 'long', seconds=60, progress=False)
except KeyboardInterrupt:
    raise SystemExit(42)
" > int.out 2>&1 &
py=$!
track $py
wait_for 60 test -s long/metrics.jsonl || { cat int.out; fail "the long training did not start"; }
kill -INT $py
wait $py
rc=$?
[ $rc -eq 42 ] || { cat int.out; fail "Ctrl-C in tma.train: the Python program exited $rc, not with KeyboardInterrupt"; }
[ "$(json long/result.json 'd["stopped"]')" = interrupted ] || fail "tma train did not write an interrupted result"
! pgrep -f "tma train g.tmag -o long" > /dev/null || fail "tma train still runs after the Ctrl-C"
echo "python package: installed with pip, checked against tma, the docs example runs, Ctrl-C stops training"
