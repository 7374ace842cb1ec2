/*
 * transport_int.h: what transport.c needs from frame.c beyond the public
 * header: the test hook that damages an encoded frame.
 */
#ifndef TMA_TRANSPORT_INT_H
#define TMA_TRANSPORT_INT_H

#include "tma_transport.h"

/* Damages an encoded header in place for a test fault.  Faults that change
 * how much is sent adjust *hdr_len_p (header bytes sent) and *send_len_p
 * (payload bytes sent).  TMA_TRANSPORT_FAULT_PAYLOAD_BYTE is the caller's
 * (it needs a writable payload). */
void tma_transport_frame_damage(unsigned char hdr[TMA_TRANSPORT_HEADER_BYTES],
                                tma_transport_fault_t fault, size_t *hdr_len_p, size_t *send_len_p);

#endif
