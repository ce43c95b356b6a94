/* vexp.h — exp(x) for double, branch-free so that loops over arrays vectorise.
 *
 * Implements: mp_vexp(x) for x ≤ 709: x = n·ln2 + r with |r| ≤ ln2/2 (n by the 1.5·2^52
 * "shifter" rounding trick, ln2 split into a high part exact to 32 bits and a low part), exp(r)
 * by its Taylor polynomial to degree 13 (truncation < 1e-17 relative), times 2^n built directly
 * in the exponent bits. Inputs below −708 return 0 (exp(−708) = 3.3e-308: the softmax here only
 * exponentiates x − max ≤ 0, where such terms vanish next to the max's 1).
 * Accurate to about 1 ulp, and deterministic: the same bits at any vector width (no int/float
 * conversion instructions, which need AVX-512DQ to vectorise).
 * Does not: handle NaN, +inf, or x > 709 (callers pass finite x ≤ 0).
 * Tested by: tests/test_posmap.c (against libm exp over [−745, 0] and at edge points).
 */
#ifndef MP_VEXP_H
#define MP_VEXP_H

#include <stdint.h>
#include <string.h>

static inline double mp_vexp(double x) {
    const double ln2_hi = 6.93147180369123816490e-01; /* 0x3fe62e42fee00000 */
    const double ln2_lo = 1.90821492927058770002e-10;
    const double inv_ln2 = 1.44269504088896338700e+00;
    const double shifter = 6755399441055744.0; /* 1.5·2^52: t = y + shifter rounds y to an integer */
    const double xc = x < -708.0 ? -708.0 : x;
    const double t = xc * inv_ln2 + shifter;
    const double fn = t - shifter;
    uint64_t tb;
    memcpy(&tb, &t, sizeof tb);
    const uint64_t n_biased = tb - UINT64_C(0x4338000000000000) + 1023; /* n + 1023, in [2, 2046] */
    const double r = (xc - fn * ln2_hi) - fn * ln2_lo;
    /* Horner, Taylor coefficients 1/k! */
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    const uint64_t sb = n_biased << 52;
    double scale;
    memcpy(&scale, &sb, sizeof scale);
    const double y = p * scale;
    return x < -708.0 ? 0.0 : y;
}

#endif
