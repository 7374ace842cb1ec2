/*
 * tmag_int.h: the .tmag file's on-disk layout (docs/formats.md), shared by
 * its reader (tmag.c) and its writers (tmag_write.c).
 */
#ifndef TMA_GRAPH_TMAG_INT_H
#define TMA_GRAPH_TMAG_INT_H

#include <stdint.h>

#include "tma_common.h"

#define TMAG_MAGIC "TMAGRAPH"
#define TMAG_HEADER_BYTES 4096u
#define TMAG_ALIGN 4096u
#define TMAG_MAX_SECTIONS 16

/* Header flags. */
#define TMAG_FLAG_LABELS 1u      /* the labels section is present */
#define TMAG_FLAG_GIVEN_SPLIT 2u /* the split came with the dataset: negatives as given */


#define TMAG_MAX_NAMES_BYTES (64u << 20)

/* The header's kind of a shard's inference file (partition_infer.c); 0 and 1
 * are tma_graph_kind_t's. */
#define TMAG_KIND_INFER 2u

typedef struct tmag_section {
    uint32_t id;
    uint32_t elem_size;
    uint64_t offset;
    uint64_t count;
    uint32_t crc;
    uint32_t reserved;
} tmag_section_t;

/* The on-disk header (little-endian, packed by construction: all fields are
 * naturally aligned).  Its size is fixed by TMAG_HEADER_BYTES; the last four
 * bytes of that block hold the CRC32C of the bytes before them. */
typedef struct tmag_header {
    char magic[8];
    uint32_t version;
    uint32_t header_bytes;
    uint32_t kind;
    uint32_t flags;
    uint64_t num_nodes;
    uint64_t num_edges;
    uint64_t num_train_edges;
    uint64_t num_val;
    uint64_t num_test;
    uint32_t feature_dim;
    uint32_t num_negatives;
    uint32_t num_classes;
    uint32_t shard_index;
    uint32_t num_shards;
    uint32_t num_sections;
    uint64_t split_seed;
    uint64_t graph_id;
    uint64_t file_bytes; /* the whole file's size: a shorter file is truncated */
    uint32_t num_node_types; /* version 2 (0 in version 1) */
    uint32_t num_relations;  /* version 2: base relations (0 in version 1) */
    uint32_t feat_dtype;     /* tma_feat_dtype_t of the features section (0: float32, as before) */
    uint32_t reserved32;
    uint64_t reserved[5];
    tmag_section_t sections[TMAG_MAX_SECTIONS];
} tmag_header_t;

_Static_assert(sizeof(tmag_section_t) == 32, "section entry layout");
_Static_assert(sizeof(tmag_header_t) + 4 <= TMAG_HEADER_BYTES, "header fits its block");

/* CRC of a large array in parallel chunks of 16 MiB, combined by hashing the
 * chunk CRCs in order (the same bytes give the same value at any thread
 * count); the streaming writer computes the same chunk by chunk. */
uint32_t graph_section_crc(const void *data, uint64_t bytes);

/* The start of a full graph's content id (tma_graph_content_id): its counts,
 * and the feature type when it is not float32 (so float32 ids are those of
 * files written before the type existed); each section's CRC is then hashed
 * in. */
static inline uint64_t tmag_content_id_start(uint64_t nodes, uint64_t edges, uint32_t feat_dtype)
{
    uint64_t h = tma_hash64(nodes) ^ tma_hash64(edges + 17);
    return feat_dtype ? tma_hash64(h ^ (0x66656174ull << 32 | feat_dtype)) : h;
}

/* Reads and checks the header of the .tmag file at path (magic, version,
 * header checksum, counts, the file size it records) without mapping the
 * file or reading its sections.  TMA_ERR_NOT_FOUND when the file does not
 * exist, TMA_ERR_IO when it cannot be opened or read, TMA_ERR_FORMAT,
 * TMA_ERR_CHECKSUM or TMA_ERR_MISMATCH for a bad header; each logged,
 * naming the path. */
tma_status_t tmag_header_read(const char *path, tmag_header_t *h_p);

/* The header at `data` (`avail` bytes of it readable) of a file of `size`
 * bytes: magic, version, header checksum, count ranges (kinds 0 to 2) and
 * the file size it records.  Logs what is wrong, naming path. */
tma_status_t tmag_header_check(const char *path, const void *data, size_t avail, size_t size, tmag_header_t *h_p);
/* Points *dst at section `id` of the mapped file after checking its element
 * size, count, bounds and (with verify) checksum; a missing section is an
 * error when `required` and count > 0, else leaves NULL. */
tma_status_t tmag_bind_section(const char *path, const tma_mmap_t *m, const tmag_header_t *h, uint32_t id,
                               const char *name, uint32_t elem_size, uint64_t count, int required, int verify,
                               const void **dst);

#endif
