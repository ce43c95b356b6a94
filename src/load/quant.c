/* quant.c — element types and f32 conversion; see quant.h.
 *
 * Block layouts and formulas follow ../shared/docs/model-formats.md §3.2 (read from ggml's
 * ggml-common.h / ggml-quants.c): every multi-byte field is little-endian and read byte-wise,
 * so blocks need no alignment. Dequantisation is done in float exactly as written in the spec
 * (d*sc in float, then *q, then -m) so results match ggml's reference dequantisers.
 */
#include "load/quant.h"

#include <math.h>
#include <string.h>
#include <strings.h>

#include "core/err.h" /* MP_OK, MP_ERR, mp_size_mul */

/* ---------------------------------------------------------------- type table */

typedef struct QuantInfo {
    MpWType t;
    const char *name;
    size_t elems, bytes;
} QuantInfo;

static const QuantInfo quant_table[] = {
    {MP_WT_F32, "F32", 1, 4},      {MP_WT_F16, "F16", 1, 2},      {MP_WT_BF16, "BF16", 1, 2},
    {MP_WT_Q4_0, "Q4_0", 32, 18},  {MP_WT_Q4_1, "Q4_1", 32, 20},  {MP_WT_Q5_0, "Q5_0", 32, 22},
    {MP_WT_Q5_1, "Q5_1", 32, 24},  {MP_WT_Q8_0, "Q8_0", 32, 34},  {MP_WT_Q2_K, "Q2_K", 256, 84},
    {MP_WT_Q3_K, "Q3_K", 256, 110}, {MP_WT_Q4_K, "Q4_K", 256, 144},
    {MP_WT_Q5_K, "Q5_K", 256, 176}, {MP_WT_Q6_K, "Q6_K", 256, 210},
};
#define N_QUANT (sizeof quant_table / sizeof quant_table[0])

static const QuantInfo *quant_info(uint32_t t) {
    for (size_t i = 0; i < N_QUANT; i++)
        if ((uint32_t)quant_table[i].t == t) return &quant_table[i];
    return NULL;
}

int mp_quant_known(uint32_t t) { return quant_info(t) != NULL; }
size_t mp_quant_block_elems(MpWType t) { const QuantInfo *q = quant_info(t); return q ? q->elems : 0; }
size_t mp_quant_block_bytes(MpWType t) { const QuantInfo *q = quant_info(t); return q ? q->bytes : 0; }
const char *mp_quant_name(MpWType t) { const QuantInfo *q = quant_info(t); return q ? q->name : "?"; }

int mp_quant_parse(const char *s, MpWType *out) {
    for (size_t i = 0; i < N_QUANT; i++)
        if (!strcasecmp(s, quant_table[i].name)) {
            *out = quant_table[i].t;
            return MP_OK;
        }
    return MP_ERR;
}

int mp_quant_row_bytes(MpWType t, uint64_t n, size_t *out) {
    const QuantInfo *q = quant_info(t);
    if (!q || n % q->elems) return MP_ERR;
    if (n / q->elems > SIZE_MAX) return MP_ERR;
    return mp_size_mul((size_t)(n / q->elems), q->bytes, out);
}

/* ---------------------------------------------------------------- scalar conversions */

static float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static void wr16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

float mp_f16_to_f32(uint16_t h) {
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0) {
        float v = ldexpf((float)m, -24); /* zero or subnormal: m * 2^-24 exactly */
        return s ? -v : v;
    }
    if (e == 31) return bits_f32(s | 0x7f800000u | (m << 13));
    return bits_f32(s | ((e + 112) << 23) | (m << 13));
}

uint16_t mp_f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (x > 0x7f800000u ? (0x200 | ((x >> 13) & 0x3ff)) : 0));
    uint32_t e = x >> 23;
    if (e > 142) return (uint16_t)(sign | 0x7c00);
    if (e >= 113) { /* normal half: keep 10 mantissa bits, round the 13 dropped bits to even */
        uint32_t h = ((e - 112) << 10) | ((x >> 13) & 0x3ff), rem = x & 0x1fff;
        if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; /* a carry may give inf: correct */
        return (uint16_t)(sign | h);
    }
    if (e < 102) return sign; /* below 2^-25: rounds to zero */
    uint32_t m = (x & 0x7fffff) | 0x800000, shift = 126 - e; /* subnormal half, unit 2^-24 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    return (uint16_t)(sign | q);
}

float mp_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t mp_f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* ---------------------------------------------------------------- dequantisation, one block each */

static void dq_q8_0(float *y, const uint8_t *b) {
    float d = mp_f16_to_f32(rd16(b));
    for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

static void dq_q4_0(float *y, const uint8_t *b) {
    float d = mp_f16_to_f32(rd16(b));
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((qs[j] & 0xF) - 8) * d;
        y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
    }
}

static void dq_q4_1(float *y, const uint8_t *b) {
    float d = mp_f16_to_f32(rd16(b)), m = mp_f16_to_f32(rd16(b + 2));
    const uint8_t *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        y[j] = (float)(qs[j] & 0xF) * d + m;
        y[j + 16] = (float)(qs[j] >> 4) * d + m;
    }
}

static void dq_q5(float *y, const uint8_t *b, int with_min) {
    float d = mp_f16_to_f32(rd16(b)), m = with_min ? mp_f16_to_f32(rd16(b + 2)) : 0.0f;
    const uint8_t *p = b + (with_min ? 4 : 2);
    uint32_t qh = rd32(p);
    const uint8_t *qs = p + 4;
    for (int j = 0; j < 16; j++) {
        int xh0 = (int)(((qh >> j) << 4) & 0x10), xh1 = (int)((qh >> (j + 12)) & 0x10);
        int q0 = (qs[j] & 0xF) | xh0, q1 = (qs[j] >> 4) | xh1;
        if (with_min) {
            y[j] = (float)q0 * d + m;
            y[j + 16] = (float)q1 * d + m;
        } else {
            y[j] = (float)(q0 - 16) * d;
            y[j + 16] = (float)(q1 - 16) * d;
        }
    }
}

static void k4_scale_min(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Q4_K (qh == NULL) and Q5_K share the scale unpacking and chunk walk. */
static void dq_qk45(float *y, const uint8_t *b, int five) {
    float d = mp_f16_to_f32(rd16(b)), dmin = mp_f16_to_f32(rd16(b + 2));
    const uint8_t *scales = b + 4, *qh = five ? b + 16 : NULL, *ql = five ? b + 48 : b + 16;
    int is = 0;
    unsigned u1 = 1, u2 = 2;
    for (int c = 0; c < 4; c++) {
        int sc, m;
        k4_scale_min(is, scales, &sc, &m);
        float d1 = d * (float)sc, m1 = dmin * (float)m;
        k4_scale_min(is + 1, scales, &sc, &m);
        float d2 = d * (float)sc, m2 = dmin * (float)m;
        for (int l = 0; l < 32; l++) {
            int hi = qh && (qh[l] & u1) ? 16 : 0;
            y[l] = d1 * (float)((ql[l] & 0xF) + hi) - m1;
        }
        for (int l = 0; l < 32; l++) {
            int hi = qh && (qh[l] & u2) ? 16 : 0;
            y[32 + l] = d2 * (float)((ql[l] >> 4) + hi) - m2;
        }
        y += 64;
        ql += 32;
        is += 2;
        u1 <<= 2;
        u2 <<= 2;
    }
}

/* Q2_K { u8 scales[16]; u8 qs[64]; half d; half dmin; }: 16 groups of 16 elements, group g uses
 * scales[g] (low nibble: scale, high nibble: min); 2-bit q at bit 2j of byte qs[32n + l (+16)]
 * for half n, pair index j = (g % 8) / 2. */
static void dq_q2_k(float *y, const uint8_t *b) {
    const uint8_t *sc = b, *qs = b + 16;
    float d = mp_f16_to_f32(rd16(b + 80)), dmin = mp_f16_to_f32(rd16(b + 82));
    for (int g = 0; g < 16; g++) {
        int n = g / 8, j = (g % 8) / 2, sub = g % 2;
        float dl = d * (float)(sc[g] & 0xF), ml = dmin * (float)(sc[g] >> 4);
        const uint8_t *q = qs + 32 * n + 16 * sub;
        for (int l = 0; l < 16; l++) y[16 * g + l] = dl * (float)((q[l] >> (2 * j)) & 3) - ml;
    }
}

/* 6-bit scale i of Q3_K (0..63; used as scale - 32): low 4 bits from byte i (i < 8) or the high
 * nibble of byte i-8; high 2 bits from byte 8 + i%4 at bit 2*(i/4). */
static int q3k_scale(const uint8_t *s, int i) {
    int lo = i < 8 ? s[i] & 0xF : s[i - 8] >> 4;
    int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
    return lo | (hi << 4);
}

/* Q3_K { u8 hmask[32]; u8 qs[64]; u8 scales[12]; half d; }: like Q2_K's walk; value
 * (q - 4 when the hmask bit 4n+j of byte l is clear) * d * (scale - 32). */
static void dq_q3_k(float *y, const uint8_t *b) {
    const uint8_t *hm = b, *qs = b + 32, *sc = b + 96;
    float d = mp_f16_to_f32(rd16(b + 108));
    for (int g = 0; g < 16; g++) {
        int n = g / 8, j = (g % 8) / 2, sub = g % 2;
        float dl = d * (float)(q3k_scale(sc, g) - 32);
        unsigned m = 1u << (4 * n + j);
        for (int l = 16 * sub; l < 16 * sub + 16; l++) {
            int q = ((qs[32 * n + l] >> (2 * j)) & 3) - ((hm[l] & m) ? 0 : 4);
            y[16 * g + (l - 16 * sub)] = dl * (float)q;
        }
    }
}

static void dq_q6_k(float *y, const uint8_t *b) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = mp_f16_to_f32(rd16(b + 208));
    for (int n = 0; n < 2; n++) {
        for (int l = 0; l < 32; l++) {
            int is = l / 16;
            int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = d * (float)sc[is + 0] * (float)q1;
            y[l + 32] = d * (float)sc[is + 2] * (float)q2;
            y[l + 64] = d * (float)sc[is + 4] * (float)q3;
            y[l + 96] = d * (float)sc[is + 6] * (float)q4;
        }
        y += 128;
        ql += 64;
        qh += 32;
        sc += 8;
    }
}

void mp_quant_dequant(float *dst, const void *src, MpWType t, size_t n) {
    const uint8_t *s = src;
    switch (t) {
    case MP_WT_F32: memcpy(dst, s, n * 4); return;
    case MP_WT_F16: for (size_t i = 0; i < n; i++) dst[i] = mp_f16_to_f32(rd16(s + 2 * i)); return;
    case MP_WT_BF16: for (size_t i = 0; i < n; i++) dst[i] = mp_bf16_to_f32(rd16(s + 2 * i)); return;
    default: break;
    }
    size_t be = mp_quant_block_elems(t), bb = mp_quant_block_bytes(t);
    MP_ASSERT(be > 0 && n % be == 0);
    for (size_t k = 0; k < n / be; k++, dst += be, s += bb) {
        switch (t) {
        case MP_WT_Q8_0: dq_q8_0(dst, s); break;
        case MP_WT_Q4_0: dq_q4_0(dst, s); break;
        case MP_WT_Q4_1: dq_q4_1(dst, s); break;
        case MP_WT_Q5_0: dq_q5(dst, s, 0); break;
        case MP_WT_Q5_1: dq_q5(dst, s, 1); break;
        case MP_WT_Q2_K: dq_q2_k(dst, s); break;
        case MP_WT_Q3_K: dq_q3_k(dst, s); break;
        case MP_WT_Q4_K: dq_qk45(dst, s, 0); break;
        case MP_WT_Q5_K: dq_qk45(dst, s, 1); break;
        case MP_WT_Q6_K: dq_q6_k(dst, s); break;
        default: MP_ASSERT(0 && "unknown weight type");
        }
    }
}

/* ---------------------------------------------------------------- quantisation (writer side) */

int mp_quant_can_encode(MpWType t) { return mp_quant_known(t); }

/* The entry of x (n floats) with the largest magnitude, sign kept (the first one on ties): the
 * symmetric quantisers scale by it so that it lands exactly on the most negative level. */
static float max_by_magnitude(const float *x, int n) {
    float amax = 0, max = 0;
    for (int j = 0; j < n; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    return max;
}

static void enc_q8_0(uint8_t *b, const float *x) {
    float amax = 0;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
    wr16(b, mp_f32_to_f16(d));
    for (int j = 0; j < 32; j++) b[2 + j] = (uint8_t)(int8_t)lrintf(x[j] * id);
}

static void enc_q4_0(uint8_t *b, const float *x) {
    const float max = max_by_magnitude(x, 32);
    float d = max / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
    wr16(b, mp_f32_to_f16(d));
    for (int j = 0; j < 16; j++) {
        int q0 = (int)(x[j] * id + 8.5f), q1 = (int)(x[j + 16] * id + 8.5f);
        q0 = q0 < 0 ? 0 : q0 > 15 ? 15 : q0;
        q1 = q1 < 0 ? 0 : q1 > 15 ? 15 : q1;
        b[2 + j] = (uint8_t)(q0 | (q1 << 4));
    }
}

/* Shared helpers: min/max of n values (min clamped to <= 0 for the K-quants' "-min" form). */
static void minmax(const float *x, int n, float *mn, float *mx) {
    *mn = x[0];
    *mx = x[0];
    for (int i = 1; i < n; i++) {
        *mn = fminf(*mn, x[i]);
        *mx = fmaxf(*mx, x[i]);
    }
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Q4_1 / Q5_1: affine grid min..max in 15 / 31 steps. */
static void enc_q41_q51(uint8_t *b, const float *x, int five) {
    float mn, mx;
    minmax(x, 32, &mn, &mx);
    int levels = five ? 31 : 15;
    uint16_t dh = mp_f32_to_f16((mx - mn) / (float)levels), mh = mp_f32_to_f16(mn);
    float d = mp_f16_to_f32(dh), m = mp_f16_to_f32(mh), id = d != 0 ? 1.0f / d : 0.0f;
    wr16(b, dh);
    wr16(b + 2, mh);
    uint8_t *qs = b + (five ? 8 : 4);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        int q0 = clampi((int)lrintf((x[j] - m) * id), 0, levels), q1 = clampi((int)lrintf((x[j + 16] - m) * id), 0, levels);
        qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
        qh |= (uint32_t)(q0 >> 4) << j;
        qh |= (uint32_t)(q1 >> 4) << (j + 16);
    }
    if (five)
        for (int k = 0; k < 4; k++) b[4 + k] = (uint8_t)(qh >> (8 * k));
}

/* Q5_0: like Q4_0 with 32 levels: d = max / -16. */
static void enc_q5_0(uint8_t *b, const float *x) {
    const float max = max_by_magnitude(x, 32);
    uint16_t dh = mp_f32_to_f16(max / -16.0f);
    float d = mp_f16_to_f32(dh), id = d != 0 ? 1.0f / d : 0.0f;
    wr16(b, dh);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        int q0 = clampi((int)lrintf(x[j] * id) + 16, 0, 31), q1 = clampi((int)lrintf(x[j + 16] * id) + 16, 0, 31);
        b[6 + j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
        qh |= (uint32_t)(q0 >> 4) << j;
        qh |= (uint32_t)(q1 >> 4) << (j + 16);
    }
    for (int k = 0; k < 4; k++) b[2 + k] = (uint8_t)(qh >> (8 * k));
}

/* Q4_K / Q5_K: per 32-element sub-block an affine grid -min..max in 15 / 31 steps, its scale
 * and minimum quantised to 6 bits against the super-block's d and dmin (simple, not
 * error-optimal). */
static void enc_qk45(uint8_t *b, const float *x, int five) {
    int levels = five ? 31 : 15;
    float scale[8], minv[8], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        float mn, mx;
        minmax(x + 32 * j, 32, &mn, &mx);
        mn = fminf(mn, 0);
        mx = fmaxf(mx, 0);
        scale[j] = (mx - mn) / (float)levels;
        minv[j] = -mn;
        max_scale = fmaxf(max_scale, scale[j]);
        max_min = fmaxf(max_min, minv[j]);
    }
    uint16_t dh = mp_f32_to_f16(max_scale / 63.0f), mh = mp_f32_to_f16(max_min / 63.0f);
    float d = mp_f16_to_f32(dh), dmin = mp_f16_to_f32(mh);
    int ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
        ls[j] = d > 0 ? clampi((int)lrintf(scale[j] / d), 0, 63) : 0;
        lm[j] = dmin > 0 ? clampi((int)lrintf(minv[j] / dmin), 0, 63) : 0;
    }
    wr16(b, dh);
    wr16(b + 2, mh);
    uint8_t *sc = b + 4;
    memset(sc, 0, 12);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            sc[j] = (uint8_t)ls[j];
            sc[j + 4] = (uint8_t)lm[j];
        } else {
            sc[j + 4] = (uint8_t)((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
            sc[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            sc[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
    uint8_t q[256];
    for (int j = 0; j < 8; j++) {
        float de = d * (float)ls[j], me = dmin * (float)lm[j];
        for (int l = 0; l < 32; l++) q[32 * j + l] = (uint8_t)(de > 0 ? clampi((int)lrintf((x[32 * j + l] + me) / de), 0, levels) : 0);
    }
    uint8_t *qh = five ? b + 16 : NULL, *qs = five ? b + 48 : b + 16;
    if (qh) memset(qh, 0, 32);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            int lo = q[64 * c + l], hi = q[64 * c + 32 + l];
            qs[32 * c + l] = (uint8_t)((lo & 0xF) | ((hi & 0xF) << 4));
            if (qh) qh[l] |= (uint8_t)(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
        }
}

/* Q2_K: 16 groups of 16, affine 4 levels; 4-bit scale and min against d, dmin. Group g sits in
 * half n = g/8, pair j = (g%8)/2, bytes 32n + 16(g%2) + l, bits 2j. */
static void enc_q2_k(uint8_t *b, const float *x) {
    float scale[16], minv[16], max_scale = 0, max_min = 0;
    for (int g = 0; g < 16; g++) {
        float mn, mx;
        minmax(x + 16 * g, 16, &mn, &mx);
        mn = fminf(mn, 0);
        mx = fmaxf(mx, 0);
        scale[g] = (mx - mn) / 3.0f;
        minv[g] = -mn;
        max_scale = fmaxf(max_scale, scale[g]);
        max_min = fmaxf(max_min, minv[g]);
    }
    uint16_t dh = mp_f32_to_f16(max_scale / 15.0f), mh = mp_f32_to_f16(max_min / 15.0f);
    float d = mp_f16_to_f32(dh), dmin = mp_f16_to_f32(mh);
    memset(b, 0, 84);
    for (int g = 0; g < 16; g++) {
        int ls = d > 0 ? clampi((int)lrintf(scale[g] / d), 0, 15) : 0, lm = dmin > 0 ? clampi((int)lrintf(minv[g] / dmin), 0, 15) : 0;
        b[g] = (uint8_t)(ls | (lm << 4));
        float de = d * (float)ls, me = dmin * (float)lm;
        int n = g / 8, j = (g % 8) / 2, sub = g % 2;
        for (int l = 0; l < 16; l++) {
            int q = de > 0 ? clampi((int)lrintf((x[16 * g + l] + me) / de), 0, 3) : 0;
            b[16 + 32 * n + 16 * sub + l] |= (uint8_t)(q << (2 * j));
        }
    }
    wr16(b + 80, dh);
    wr16(b + 82, mh);
}

/* Q3_K: 16 groups of 16, symmetric levels -4..3 with a signed scale (max / -4, as Q4_0 does),
 * 6-bit scales (stored +32) against d; the 3rd bit goes to hmask (set when q + 4 >= 4). */
static void enc_q3_k(uint8_t *b, const float *x) {
    float scale[16], max_abs = 0;
    for (int g = 0; g < 16; g++) {
        const float max = max_by_magnitude(x + 16 * g, 16);
        scale[g] = max / -4.0f;
        max_abs = fmaxf(max_abs, fabsf(scale[g]));
    }
    uint16_t dh = mp_f32_to_f16(max_abs / 31.0f);
    float d = mp_f16_to_f32(dh);
    memset(b, 0, 110);
    uint8_t *hm = b, *qs = b + 32, *sc = b + 96;
    for (int g = 0; g < 16; g++) {
        int ls = d > 0 ? clampi((int)lrintf(scale[g] / d), -31, 31) : 0, s6 = ls + 32;
        if (g < 8) sc[g] |= (uint8_t)(s6 & 0xF);
        else sc[g - 8] |= (uint8_t)((s6 & 0xF) << 4);
        sc[8 + g % 4] |= (uint8_t)((s6 >> 4) << (2 * (g / 4)));
        float de = d * (float)ls;
        int n = g / 8, j = (g % 8) / 2, sub = g % 2;
        for (int l = 0; l < 16; l++) {
            int q = de != 0 ? clampi((int)lrintf(x[16 * g + l] / de), -4, 3) : 0, u = q + 4;
            int li = 16 * sub + l;
            qs[32 * n + li] |= (uint8_t)((u & 3) << (2 * j));
            if (u & 4) hm[li] |= (uint8_t)(1u << (4 * n + j));
        }
    }
    wr16(b + 108, dh);
}

/* Q6_K: 16 groups of 16 (group g = e/16 uses scales[g]), levels -32..31, int8 scales against d.
 * Element e = 128n + 32k + l: low 4 bits in ql[64n + l + 32(k&1)] (high nibble when k >= 2),
 * top 2 bits in qh[32n + l] at bit 2k. */
static void enc_q6_k(uint8_t *b, const float *x) {
    float scale[16], max_abs = 0;
    for (int g = 0; g < 16; g++) {
        const float max = max_by_magnitude(x + 16 * g, 16);
        scale[g] = max / -32.0f;
        max_abs = fmaxf(max_abs, fabsf(scale[g]));
    }
    uint16_t dh = mp_f32_to_f16(max_abs / 127.0f);
    float d = mp_f16_to_f32(dh);
    memset(b, 0, 210);
    for (int g = 0; g < 16; g++) {
        int ls = d > 0 ? clampi((int)lrintf(scale[g] / d), -127, 127) : 0;
        b[192 + g] = (uint8_t)(int8_t)ls;
        float de = d * (float)ls;
        for (int i = 0; i < 16; i++) {
            int e = 16 * g + i, n = e / 128, k = (e % 128) / 32, l = e % 32;
            int u = (de != 0 ? clampi((int)lrintf(x[e] / de), -32, 31) : 0) + 32;
            uint8_t *ql = b + 64 * n + l + 32 * (k & 1);
            *ql |= (uint8_t)((u & 0xF) << (k >= 2 ? 4 : 0));
            b[128 + 32 * n + l] |= (uint8_t)((u >> 4) << (2 * k));
        }
    }
    wr16(b + 208, dh);
}

int mp_quant_encode(void *dst, const float *src, MpWType t, size_t n) {
    uint8_t *d = dst;
    switch (t) {
    case MP_WT_F32:
        for (size_t i = 0; i < n; i++) {
            uint32_t u = f32_bits(src[i]);
            d[4 * i] = (uint8_t)u;
            d[4 * i + 1] = (uint8_t)(u >> 8);
            d[4 * i + 2] = (uint8_t)(u >> 16);
            d[4 * i + 3] = (uint8_t)(u >> 24);
        }
        return MP_OK;
    case MP_WT_F16: for (size_t i = 0; i < n; i++) wr16(d + 2 * i, mp_f32_to_f16(src[i])); return MP_OK;
    case MP_WT_BF16: for (size_t i = 0; i < n; i++) wr16(d + 2 * i, mp_f32_to_bf16(src[i])); return MP_OK;
    case MP_WT_Q8_0: for (size_t k = 0; k < n / 32; k++) enc_q8_0(d + 34 * k, src + 32 * k); return MP_OK;
    case MP_WT_Q4_0: for (size_t k = 0; k < n / 32; k++) enc_q4_0(d + 18 * k, src + 32 * k); return MP_OK;
    case MP_WT_Q4_1: for (size_t k = 0; k < n / 32; k++) enc_q41_q51(d + 20 * k, src + 32 * k, 0); return MP_OK;
    case MP_WT_Q5_0: for (size_t k = 0; k < n / 32; k++) enc_q5_0(d + 22 * k, src + 32 * k); return MP_OK;
    case MP_WT_Q5_1: for (size_t k = 0; k < n / 32; k++) enc_q41_q51(d + 24 * k, src + 32 * k, 1); return MP_OK;
    case MP_WT_Q2_K: for (size_t k = 0; k < n / 256; k++) enc_q2_k(d + 84 * k, src + 256 * k); return MP_OK;
    case MP_WT_Q3_K: for (size_t k = 0; k < n / 256; k++) enc_q3_k(d + 110 * k, src + 256 * k); return MP_OK;
    case MP_WT_Q4_K: for (size_t k = 0; k < n / 256; k++) enc_qk45(d + 144 * k, src + 256 * k, 0); return MP_OK;
    case MP_WT_Q5_K: for (size_t k = 0; k < n / 256; k++) enc_qk45(d + 176 * k, src + 256 * k, 1); return MP_OK;
    case MP_WT_Q6_K: for (size_t k = 0; k < n / 256; k++) enc_q6_k(d + 210 * k, src + 256 * k); return MP_OK;
    default: return MP_ERR;
    }
}
