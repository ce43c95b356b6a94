/* probe_flip.h — the block test's sign flips (the noise level of probe.h's block z): which of
 * MP_PROBE_FLIPS signs ε_f = ±1 one sequence draws, from a hash of its own block means. One
 * definition for both sides: the host's accumulator (probe_acc.c's maps row) and the CUDA device
 * accumulator (src/cuda/cuda_acc.cu, compiled by nvcc as host and device code), so the two draw
 * the same signs for the same block means.
 *
 * Implements:
 *   - MP_PROBE_FLIPS: the number of sign-flipped copies of the block sums (bflip [L, F, nb, nb]);
 *   - mp_probe_flip_bits: bit f set when ε_f = −1, from the block means bm [nb·nb] (NaN: a block
 *     with no entry) rounded to float (round to nearest; NaN as the quiet NaN 0x7fc00000), their
 *     little-endian bytes through FNV-1a 64 (core/util.c's mp_fnv1a64, the same steps) and the
 *     murmur3 finaliser. Rounding to float makes the signs the same for means summed in another
 *     order (a GPU's reduction, PyTorch's) but for a rounding boundary crossed (about 1e-8 a mean).
 * Does not: add anything (mp_probe_acc_block_seq, probe_acc.c; the device's acc_block_kernel).
 * Implemented by: this header (static inline; host and device under nvcc).
 * Tested by: tests/test_probe_signif.c (against a second implementation: mp_fnv1a64 over the
 *   floats' bytes; every sequence its own signs), tests/cuda/test_cuda.c (bflip on the device, bit
 *   for bit against the host's).
 *
 * Shape legend: nb blocks per side (at most 16).
 */
#ifndef MP_PROBE_FLIP_H
#define MP_PROBE_FLIP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define MP_PROBE_FLIPS 32

#ifdef __CUDACC__
#define MP_PROBE_FLIP_FN static inline __host__ __device__
#else
#define MP_PROBE_FLIP_FN static inline
#endif

/* F sign bits (bit f: ε_f = −1) of one sequence's block means bm [nb·nb] (NaN: no entry). */
MP_PROBE_FLIP_FN uint32_t mp_probe_flip_bits(const double *bm, int nb) {
    uint64_t h = 14695981039346656037ULL; /* MP_FNV_INIT */
    for (int k = 0; k < nb * nb; k++) {
        const float f = (float)bm[k];
        uint32_t w = 0x7fc00000u; /* NaN: one pattern whatever the NaN's sign and payload */
        if (!isnan(bm[k])) memcpy(&w, &f, sizeof w);
        for (int b = 0; b < 4; b++) { /* the float's bytes, little-endian */
            h ^= (w >> (8 * b)) & 0xffu;
            h *= 1099511628211ULL;
        }
    }
    h ^= h >> 33; /* the murmur3 finaliser: every output bit depends on every input bit */
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return (uint32_t)h;
}

#undef MP_PROBE_FLIP_FN

#endif
