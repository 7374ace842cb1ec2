#!/bin/bash
# test_install.sh: `make install DESTDIR=...` installs the tma program (and its
# CUDA module, in a CUDA build), the documents in share/doc/tma, a man
# page for tma and each command (made from the --help texts by help2man, when
# configure found it), and a bash completion that completes the commands and
# each command's options from the installed tma.
. "$TMA_SRCDIR/tests/lib.sh"
D=$TMP_ROOT/dest
# (A make of its own: not the jobserver or variables of a `make check` around it.)
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$TMA_BUILDDIR" install DESTDIR="$D" > "$TMP_ROOT/install.out" 2>&1 ||
  { tail -20 "$TMP_ROOT/install.out" >&2; fail "make install DESTDIR failed"; }
bin=$(find "$D" -path '*/bin/tma' -type f) && [ -x "$bin" ] || fail "no bin/tma under $D"
"$bin" --version | grep -q '^tma ' || fail "the installed tma does not run"

# The CUDA backend's module: installed in pkglibdir, where the installed tma
# (here under DESTDIR) finds it without TMA_CUDA_MODULE, and it alone links CUDA.
if "$bin" --version | grep -q "CUDA support: compiled in"; then
  mod=$(find "$D" -path '*/lib/tma/tma-cuda.so' -type f) && [ -n "$mod" ] || fail "no lib/tma/tma-cuda.so under $D"
  ! ldd "$bin" | grep -E 'libcudart|libcublas' || fail "the installed tma links CUDA itself"
  "$TMA_BUILDDIR/tests/gnn/write_test_graph" "$TMP_ROOT/g.tmag" 200 8 0 1 || hard "cannot write the test graph"
  env -u TMA_CUDA_MODULE "$bin" train "$TMP_ROOT/g.tmag" --device cuda --steps 1 -q -o "$TMP_ROOT/run" \
    > /dev/null 2> "$TMP_ROOT/cuda.err"
  if grep -q "module" "$TMP_ROOT/cuda.err"; then cat "$TMP_ROOT/cuda.err" >&2; fail "the installed tma did not load $mod"; fi
fi

# Man pages: one for tma and one for each command of `tma --help`.
cmds=$("$bin" --help | awk '/^Commands:/ {c = 1; next} c && /^  [a-z]/ {print $1} c && /^$/ {c = 0}')
[ "$(echo "$cmds" | wc -w)" -ge 10 ] || fail "tma --help lists too few commands: $cmds"
if [ -n "$TMA_HELP2MAN" ]; then
  mandir=$(dirname "$(find "$D" -name tma.1 -path '*/man1/*')") || fail "no man1/tma.1 under $D"
  for c in $cmds; do
    [ -s "$mandir/tma-$c.1" ] || fail "no man page for tma $c"
  done
  grep -q 'Exit status' "$mandir/tma.1" || fail "tma.1 lacks the exit status table of tma --help"
  grep -q 'eval\\-every\\-seconds' "$mandir/tma-train.1" || fail "tma-train.1 lacks train's options"
  grep -q 'rmat' "$mandir/tma-gen.1" || fail "tma-gen.1 lacks gen's models"
  grep -q '^\.SH NAME' "$mandir/tma-launch.1" && grep -A1 '^\.SH NAME' "$mandir/tma-launch.1" | grep -q 'distributed job' ||
    fail "tma-launch.1's NAME is not launch's summary"
else
  echo "help2man was not found by configure: the man pages are not checked (apt-get install help2man)"
  find "$D" -name '*.1' | grep -q . && fail "man pages installed without help2man"
fi

# The documents the man pages and --help texts point to (docs/X.md), in
# share/doc/tma: every one of the source's docs/*.md and the README.
docdir=$(dirname "$(find "$D" -path '*/share/doc/tma/README.md')") || fail "no share/doc/tma/README.md under $D"
[ -n "$docdir" ] && [ "$docdir" != . ] || fail "no share/doc/tma/README.md under $D"
for f in "$TMA_SRCDIR"/docs/*.md; do
  cmp -s "$f" "$docdir/$(basename "$f")" || fail "docs/$(basename "$f") is not installed in $docdir"
done
for ref in $("$bin" train --help | grep -o 'docs/[a-z_]*\.md' | sort -u); do
  [ -s "$docdir/${ref#docs/}" ] || fail "tma train --help names $ref, not installed"
done
if [ -n "$TMA_HELP2MAN" ]; then
  grep -q "share/doc/tma/NAME.md" "$mandir/tma-export.1" || fail "tma-export.1 does not say where docs/ is installed"
fi

# Bash completion: commands, options (gen's per model), and files for arguments.
comp=$(find "$D" -path '*/bash-completion/completions/tma' -type f) || fail "no bash completion under $D"
[ -n "$comp" ] || fail "no bash completion under $D"
complete_words() { # complete_words WORD... : COMPREPLY for the last word, with $bin as tma
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _tma; echo "${COMPREPLY[*]}"' \
    _ "$comp" "$bin" "${@:2}"
}
[ "$(complete_words tma tr)" = train ] || fail "tma tr<TAB> gave '$(complete_words tma tr)'"
[ "$(complete_words tma la)" = launch ] || fail "tma la<TAB>"
[ "$(complete_words tma train --eval)" = --eval-every-seconds ] || fail "tma train --eval<TAB> gave '$(complete_words tma train --eval)'"
[ "$(complete_words tma --log-level info launch --ke)" = --keep ] || fail "tma --log-level info launch --ke<TAB>"
[ "$(complete_words tma gen sbm --homo)" = --homophily ] || fail "tma gen sbm --homo<TAB>"
[ "$(complete_words tma gen rmat --sc)" = --scale ] || fail "tma gen rmat --sc<TAB>"
[ "$(complete_words tma gen r)" = rmat ] || fail "tma gen r<TAB>"
[ -z "$(complete_words tma train --nosuch)" ] || fail "an unknown option completed"
# values of the options that take one of a few
[ "$(complete_words tma partition g.tmag --scheme r)" = random ] || fail "--scheme r<TAB> gave '$(complete_words tma partition g.tmag --scheme r)'"
[ "$(complete_words tma partition g.tmag --scheme super)" = "supernode supernode:" ] || fail "--scheme super<TAB>"
[ "$(complete_words tma train g.tmag --encoder s)" = sage ] || fail "--encoder s<TAB> gave '$(complete_words tma train g.tmag --encoder s)'"
[ "$(complete_words tma eval g.tmag w --device c)" = "cpu cuda cuda:0 cuda:1" ] || fail "--device c<TAB>"
[ "$(complete_words tma eval g.tmag w --ties m)" = mean ] || fail "--ties m<TAB>"
echo "installed: $bin, man pages, bash completion"
