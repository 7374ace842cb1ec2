#!/bin/bash
# dgl_env.sh: the virtual environment that bench/gnn/dgl_gnn.py runs in (DGL 2.1.0 on PyTorch 2.1.2,
# from PyPI), created on first use and reused after; prints the path of its python on stdout.
# The pins are a combination that imports and runs on these machines (issue 18): DGL 2.1.0 needs
# torch 2.1.x and torchdata 0.7.x, and breaks with numpy 2, pandas 2.2 and setuptools 70.
# PyPI's torch 2.1.2 for Linux x86_64 is the CUDA build: pip pulls its nvidia-* libraries too
# (about 2.5 GiB), which torch needs to import even on a CPU; the CPU-only wheel is only on
# download.pytorch.org.  The venv lives outside the repository.
#
# Usage: bench/gnn/dgl_env.sh
# Environment: TMA_DGL_VENV (default ~/.cache/tma/dgl-venv), PYTHON (default python3 on PATH, 3.8-3.11).
set -euo pipefail
VENV=${TMA_DGL_VENV:-$HOME/.cache/tma/dgl-venv}
PYTHON=${PYTHON:-python3}
PINS=(torch==2.1.2 torchdata==0.7.1 dgl==2.1.0 "numpy<2" "pandas<2.2" "setuptools<70"
      pyyaml pydantic scipy networkx requests tqdm psutil)
CHECK='import dgl, torch; print("dgl", dgl.__version__, "torch", torch.__version__)'

works() {
  "$VENV/bin/python" -c "$CHECK" >&2 2>"$VENV/import-check.log"
}

if [ -x "$VENV/bin/python" ] && [ -f "$VENV/.tma-pins" ] && [ "$(cat "$VENV/.tma-pins")" = "${PINS[*]}" ] &&
   works; then
  echo "$VENV/bin/python"
  exit 0
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "dgl_env.sh: creating $VENV with $(command -v "$PYTHON") ($("$PYTHON" --version 2>&1))" >&2
  mkdir -p "$(dirname "$VENV")"
  "$PYTHON" -m venv "$VENV" || {
    echo "dgl_env.sh: '$PYTHON -m venv $VENV' failed; set PYTHON to a python 3.8-3.11 with venv" >&2
    exit 1
  }
fi
echo "dgl_env.sh: installing ${PINS[*]} into $VENV (several GiB the first time)" >&2
rm -f "$VENV/.tma-pins"
if ! "$VENV/bin/pip" install --disable-pip-version-check "${PINS[@]}" >&2; then
  echo "dgl_env.sh: pip install into $VENV failed (see above); remove $VENV to start afresh" >&2
  exit 1
fi
if ! works; then
  echo "dgl_env.sh: 'import dgl, torch' fails in $VENV:" >&2
  tail -n 5 "$VENV/import-check.log" >&2
  echo "dgl_env.sh: remove $VENV and run this again; if it fails again, the pins no longer resolve" \
       "to a working set on this machine" >&2
  exit 1
fi
echo "${PINS[*]}" > "$VENV/.tma-pins"
echo "$VENV/bin/python"
