/* vexp.h — exp(x) for double and for float, branch-free so that loops over arrays vectorise.
 *
 * Implements: mp_vexp(x) for x ≤ 709: x = n·ln2 + r with |r| ≤ ln2/2 (n by the 1.5·2^52
 * "shifter" rounding trick, ln2 split into a high part exact to 32 bits and a low part), exp(r)
 * by its Taylor polynomial to degree 13 (truncation < 1e-17 relative), times 2^n built directly
 * in the exponent bits. Inputs below −708 return 0 (exp(−708) = 3.3e-308: the softmax here only
 * exponentiates x − max ≤ 0, where such terms vanish next to the max's 1).
 * Accurate to about 1 ulp, and deterministic: the same bits at any vector width (no int/float
 * conversion instructions, which need AVX-512DQ to vectorise).
 * Does not: handle NaN, +inf, or x > 709 (callers pass finite x ≤ 0).
 * mp_vexpf_neg(x): e^x in f32 for x ≤ 0 (the attention softmax's x − max), -inf giving 0 and NaN
 * NaN: the same scheme in float with fmaf (the 1.5·2^23 shifter, ln 2 in two floats, Taylor to
 * degree 7), scaled by 2^(k+64)·2^-64 so that subnormal results are rounded once. Within 1 ulp.
 * Tested by: tests/test_posmap.c (mp_vexp against libm exp over [−745, 0] and at edge points),
 * tests/test_model_kernels.c (mp_vexpf_neg against exp in double over [−104, 0], edge points).
 */
#ifndef MP_VEXP_H
#define MP_VEXP_H

#include <math.h>
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

/* e^x, x <= 0. x = k ln2 + r, |r| <= ln2/2: k = x log2(e) rounded to nearest by the shifter
 * (fused, one rounding; its low mantissa bits hold k, read without a float-to-int conversion);
 * r by Cody-Waite: ln2 = hi + lo with hi = 0x1.62e4p-1 (15 significant bits, so k·hi is exact
 * for |k| < 2^9, and here |k| <= 151); e^r by Taylor to r^7 (truncation < 0.35^8/8! = 5e-9
 * relative). Below -104, e^x < 2^-150 rounds to 0. */
static inline float mp_vexpf_neg(float x) {
    const float z = fmaf(x, 0x1.715476p+0f, 0x1.8p23f); /* 1.5·2^23 + k */
    const float k = z - 0x1.8p23f;
    float r = fmaf(k, -0x1.62e400p-1f, x);
    r = fmaf(k, -0x1.7f7d1cp-20f, r);
    float p = 0x1.a01a02p-13f; /* 1/7!, then 1/6! ... 1/0! */
    p = fmaf(p, r, 0x1.6c16c2p-10f);
    p = fmaf(p, r, 0x1.111112p-7f);
    p = fmaf(p, r, 0x1.555556p-5f);
    p = fmaf(p, r, 0x1.555556p-3f);
    p = fmaf(p, r, 0x1.000000p-1f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    uint32_t zb;
    memcpy(&zb, &z, sizeof zb);
    const uint32_t sb = (zb - 0x4B400000u + 127u + 64u) << 23; /* 2^(k+64): k >= -151 here, a normal float */
    float scale;
    memcpy(&scale, &sb, sizeof scale);
    const float y = p * scale * 0x1p-64f;
    return x < -104.0f ? 0.0f : y;
}

#endif
