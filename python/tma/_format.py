"""The on-disk formats tma writes: .tmag graphs and .tmaw weights.

Both are little-endian with a fixed header whose last four bytes are the
CRC32C of the bytes before them (docs/formats.md, docs/model.md).  The
header checksums are verified here; the large sections are not (a pure
Python CRC over gigabytes would take minutes): `tma info` verifies them.
"""

from __future__ import annotations

import struct

_CRC_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def crc32c(data: bytes, crc: int = 0) -> int:
    """CRC32C (Castagnoli), as tma computes it, of a small byte string."""
    crc ^= 0xFFFFFFFF
    table = _CRC_TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


class TmaError(Exception):
    """An error from tma: a file it refuses, or a command that failed.

    `message` is the error line; `exit_code` the command's exit status
    (None for a file refused by this package)."""

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message if exit_code is None else "%s (exit %d)" % (message, exit_code))
        self.message = message
        self.exit_code = exit_code


TMAG_MAGIC = b"TMAGRAPH"
TMAG_HEADER = 4096
# (offset, struct format, name) of the header fields read here.
_TMAG_FIELDS = struct.Struct("<8sIIII QQQQQ IIIII I QQQ III")
SECTIONS = {
    1: ("indptr", "<i8"),
    2: ("indices", "<i8"),
    3: ("features", "<f4"),
    4: ("labels", "<i4"),
    5: ("val_edges", "<i8"),
    6: ("test_edges", "<i8"),
    7: ("val_neg", "<i8"),
    8: ("test_neg", "<i8"),
    9: ("global_ids", "<i8"),
    10: ("node_types", "<i4"),
    11: ("edge_rels", "<i4"),
    12: ("val_rels", "<i4"),
    13: ("test_rels", "<i4"),
    14: ("type_feat_dim", "<i4"),
    15: ("names", "u1"),
}
# The header's feature type (offset 120) -> the features section's element.
FEAT_DTYPES = {0: ("f32", "<f4"), 1: ("f16", "<f2"), 2: ("bf16", "<u2")}


def read_tmag_header(path: str, head: bytes) -> dict:
    """Parses and checks a .tmag header (the file's first 4096 bytes)."""
    if len(head) < TMAG_HEADER:
        raise TmaError("%s: shorter than a .tmag header (%d bytes)" % (path, len(head)))
    if head[:8] != TMAG_MAGIC:
        raise TmaError("%s: not a .tmag file (magic %r)" % (path, head[:8]))
    (want,) = struct.unpack_from("<I", head, TMAG_HEADER - 4)
    if crc32c(head[: TMAG_HEADER - 4]) != want:
        raise TmaError("%s: the header checksum does not match (a damaged file)" % path)
    f = _TMAG_FIELDS.unpack_from(head, 0)
    h = dict(
        version=f[1], header_bytes=f[2], kind=f[3], flags=f[4], num_nodes=f[5], num_edges=f[6],
        num_train_edges=f[7], num_val=f[8], num_test=f[9], feature_dim=f[10], num_negatives=f[11],
        num_classes=f[12], shard_index=f[13], num_shards=f[14], num_sections=f[15], split_seed=f[16],
        graph_id=f[17], file_bytes=f[18], num_node_types=f[19], num_relations=f[20], feat_dtype=f[21],
    )
    if h["feat_dtype"] not in FEAT_DTYPES:
        raise TmaError("%s: feature type %d, which this package does not read" % (path, h["feat_dtype"]))
    if h["version"] not in (1, 2) or h["header_bytes"] != TMAG_HEADER or h["num_sections"] > 16:
        raise TmaError("%s: a .tmag version %d header this package does not read" % (path, h["version"]))
    sections = {}
    for i in range(h["num_sections"]):
        sid, esize, off, count, crc, _ = struct.unpack_from("<IIQQII", head, 168 + 32 * i)
        sections[sid] = (esize, off, count)
    h["sections"] = sections
    return h


TMAW_MAGIC = b"TMAWGHT\0"
TMAW_HEADER = 128


def read_tmaw_header(path: str, head: bytes) -> dict:
    """Parses and checks a .tmaw header (the first 128 bytes)."""
    if len(head) < TMAW_HEADER or head[:8] != TMAW_MAGIC:
        raise TmaError("%s: not a tma weight file (.tmaw)" % path)
    (want,) = struct.unpack_from("<I", head, 124)
    if crc32c(head[:124]) != want:
        raise TmaError("%s: the header checksum does not match (a damaged file)" % path)
    version, hbytes, cfg_hash, count, rnd, jlen, jcrc, pcrc = struct.unpack_from("<IIQQQIII", head, 8)
    if version != 1 or hbytes != TMAW_HEADER:
        raise TmaError("%s: a .tmaw version %d this package does not read" % (path, version))
    return dict(config_hash=cfg_hash, count=count, round=rnd, json_len=jlen, json_crc=jcrc, params_crc=pcrc)
