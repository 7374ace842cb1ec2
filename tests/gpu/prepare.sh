#!/bin/bash
# tests/gpu/prepare.sh [DIR]: run where there is a network (a development
# machine with Debian 12, like the one tma is developed on) to gather what
# tests/gpu/run.sh needs on a GPU machine that has the CUDA toolkit but neither
# a network nor tma's Debian libraries: DIR/debs (the build's -dev packages and
# the libraries they pull in, minus the base system, and etcd) and DIR/datasets/
# facebook-pages, and DIR/autotools.tar (configure and the Makefile.in that
# ./bootstrap makes, for a machine without autoconf and automake: make it
# after the last change to configure.ac or a local.mk).  DIR defaults to
# .gpu-carry; keep it out of git
# (echo /.gpu-carry/ >> .git/info/exclude) and carry it to the GPU machine:
#     tests/gpu/run.sh --carry .gpu-carry
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:-.gpu-carry}
DEBS="libucx-dev libucx0 ibverbs-providers libibverbs1 librdmacm1 libnl-3-200 libnl-route-3-200 libnuma1
  libmetis-dev libmetis5 libcjson-dev libcjson1 libcurl4-openssl-dev libcurl4 libbrotli1 libcom-err2
  libgnutls30 libgssapi-krb5-2 libhogweed6 libidn2-0 libk5crypto3 libkeyutils1 libkrb5-3 libkrb5support0
  libldap-2.5-0 libnettle8 libnghttp2-14 libp11-kit0 libpsl5 librtmp1 libsasl2-2 libsasl2-modules-db
  libssh2-1 libtasn1-6 libunistring2 libopenblas-dev libopenblas-pthread-dev libopenblas0 libopenblas0-pthread
  libgfortran5 libquadmath0 libgomp1 zlib1g-dev libssl-dev libssl3 libmicrohttpd-dev libmicrohttpd12 pkg-config libpkgconf3 pkgconf pkgconf-bin
  etcd-server etcd-client"
mkdir -p "$DIR/debs" "$DIR/datasets"
(cd "$DIR/debs" && apt-get download $DEBS)
# The datasets folder as configure's default names it (beside the checkout);
# without facebook-pages the GPU benchmark only leaves that row out.
DS=${TMA_DATASETS:-$PWD/../shared/datasets}
rm -rf "$DIR/datasets/facebook-pages"
if [ -d "$DS/facebook-pages" ]; then
  cp -r "$DS/facebook-pages" "$DIR/datasets/"
  chmod -R u+w "$DIR/datasets"
else
  echo "prepare.sh: no facebook-pages in $DS (set TMA_DATASETS): run.sh will leave out that benchmark row" >&2
fi
# Always afresh: a configure left from an older checkout names files that are gone.
./bootstrap > /dev/null || { echo "prepare.sh: ./bootstrap failed" >&2; exit 1; }
tar cf "$DIR/autotools.tar" configure Makefile.in aclocal.m4 config.h.in build-aux m4
du -sh "$DIR"
echo "ready: carry $DIR to the GPU machine and run tests/gpu/run.sh --carry $DIR"
