#!/bin/bash
# test_install.sh: `make install DESTDIR=...` installs the tma program (and its
# CUDA module, in a CUDA build), the static libraries and libtma.so with a
# tma.pc that builds a program against it, the documents in share/doc/tma, a man
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
  # --version says whether the module is usable, not only that CUDA was compiled in.
  env -u TMA_CUDA_MODULE "$bin" --version | grep -q "CUDA support: compiled in (module loaded" ||
    fail "the installed tma's --version did not load its module: $(env -u TMA_CUDA_MODULE "$bin" --version)"
  TMA_CUDA_MODULE=$TMP_ROOT/none.so "$bin" --version |
    grep -q "CUDA support: compiled in, but unusable: cannot load .*none.so" ||
    fail "--version does not say the CUDA module is missing: $(TMA_CUDA_MODULE=$TMP_ROOT/none.so "$bin" --version)"
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
  grep -q '^\.SH "EXIT STATUS"' "$mandir/tma.1" || fail "tma.1 lacks the exit status section (tma --help's table)"
  sed -n '/^\.SH COMMANDS/,/^\.SH/p' "$mandir/tma.1" | grep -q 'launch' || fail "tma.1 has no COMMANDS section listing them"
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

# The libraries: the static archives and libtma.so.0 (its soname) with the
# link libtma.so, exporting the tma_* names only and needing no CUDA; tma.pc
# builds and links a program against it without CUDA.
need readelf binutils
need pkg-config pkgconf
libdir=$(dirname "$(find "$D" -name libtma_common.a -type f)")
[ -f "$libdir/libtma_common.a" ] || fail "no libtma_common.a under $D"
[ -f "$libdir/libtma.so.0" ] && [ -L "$libdir/libtma.so" ] && [ "$(readlink "$libdir/libtma.so")" = libtma.so.0 ] ||
  fail "no libtma.so.0 and libtma.so -> libtma.so.0 beside the static libraries in $libdir"
readelf -d "$libdir/libtma.so.0" | grep -q 'SONAME.*\[libtma\.so\.0\]' || fail "libtma.so.0 has no soname libtma.so.0"
readelf -d "$libdir/libtma.so.0" | grep -E 'NEEDED.*(cudart|cublas|libcuda)' && fail "libtma.so links CUDA"
others=$(readelf --dyn-syms -W "$libdir/libtma.so.0" | awk '$5 == "GLOBAL" && $7 != "UND" {print $8}' | grep -v '^tma_')
[ -z "$others" ] || fail "libtma.so exports names outside tma_*: $(echo $others | head -c 300)"
readelf --dyn-syms -W "$libdir/libtma.so.0" | grep -q ' tma_kv_create$' || fail "libtma.so does not export tma_kv_create"
pc=$(find "$D" -name tma.pc -type f)
[ -n "$pc" ] || fail "no tma.pc under $D"
export PKG_CONFIG_PATH=$(dirname "$pc")
# (Its prefix moved under DESTDIR.)
pcx() { pkg-config --define-variable=prefix="$D$(pkg-config --variable=prefix tma)" "$@"; }
pcx --libs tma | grep -qw -- -ltma || fail "pkg-config --libs tma: $(pcx --libs tma)"
pcx --cflags --libs --static tma | grep -iE 'cuda|cublas' && fail "tma.pc asks a consumer for CUDA"
cat > "$TMP_ROOT/consumer.c" <<'C'
#include <stdio.h>
#include "tma_common.h"
int main(void) { printf("%s\n", tma_status_str(TMA_ERR_NOT_FOUND)); return 0; }
C
cc "$TMP_ROOT/consumer.c" $(pcx --cflags --libs tma) -Wl,-rpath,"$libdir" -o "$TMP_ROOT/consumer" 2> "$TMP_ROOT/cc.err" ||
  { cat "$TMP_ROOT/cc.err" >&2; fail "a program cannot be built with pkg-config tma"; }
readelf -d "$TMP_ROOT/consumer" | grep -q 'NEEDED.*libtma\.so\.0' || fail "the consumer does not link libtma.so.0"
[ "$("$TMP_ROOT/consumer")" = "not found" ] ||
  fail "the consumer printed '$("$TMP_ROOT/consumer")', not tma_status_str(TMA_ERR_NOT_FOUND)"

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
