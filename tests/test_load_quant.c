/* test_load_quant.c — dtype conversion and dequantisation of every supported block type against
 * blocks built by hand from the spec (model-formats.md §3.2) with hand-written expected values;
 * plus bounds on the writer's quantisers (encode -> decode error).
 * Run: make test (or build/tests/test_load_quant). */
#include "testutil.h"

#include "core/err.h"   /* MP_OK, MP_ERR */
#include "load/quant.h" /* mp_quant_dequant, mp_f16_to_f32, ... */

static void test_scalar_conversions(void **state) {
    (void)state;
    assert_true(mp_f16_to_f32(0x3C00) == 1.0f);
    assert_true(mp_f16_to_f32(0xC000) == -2.0f);
    assert_true(mp_f16_to_f32(0x7BFF) == 65504.0f);
    assert_true(mp_f16_to_f32(0x0001) == 5.9604644775390625e-8f); /* smallest subnormal 2^-24 */
    assert_true(mp_f16_to_f32(0x03FF) == 6.0975551605224609375e-5f);
    assert_true(mp_f16_to_f32(0x0400) == 6.103515625e-05f);
    assert_true(isinf(mp_f16_to_f32(0x7C00)) && isnan(mp_f16_to_f32(0x7E00)));
    assert_true(mp_f16_to_f32(0x8000) == 0.0f && signbit(mp_f16_to_f32(0x8000)));
    assert_int_equal(mp_f32_to_f16(1.0009765625f), 0x3C01);
    assert_int_equal(mp_f32_to_f16(1.00048828125f), 0x3C00);  /* 1 + 2^-11: tie to even */
    assert_int_equal(mp_f32_to_f16(1.00146484375f), 0x3C02);  /* 1 + 3*2^-11: tie to even */
    assert_int_equal(mp_f32_to_f16(65519.0f), 0x7BFF);
    assert_int_equal(mp_f32_to_f16(65520.0f), 0x7C00);
    assert_int_equal(mp_f32_to_f16(-1e9f), 0xFC00);
    assert_int_equal(mp_f32_to_f16(2.98023223876953125e-8f), 0x0000);  /* 2^-25: tie to even zero */
    assert_int_equal(mp_f32_to_f16(4.470348358154296875e-8f), 0x0001); /* 1.5 * 2^-25 */
    assert_int_equal(mp_f32_to_f16(6.0975551605224609375e-5f), 0x03FF);
    assert_int_equal(mp_f32_to_f16(-0.0f), 0x8000);
    assert_int_equal(mp_f32_to_f16(NAN) & 0x7C00, 0x7C00);
    assert_true(mp_bf16_to_f32(0x3F80) == 1.0f);
    assert_true(mp_bf16_to_f32(0xC2F7) == -123.5f);
    assert_int_equal(mp_f32_to_bf16(1.0f), 0x3F80);
    assert_int_equal(mp_f32_to_bf16(1.00390625f), 0x3F80);  /* 1 + 2^-8: tie to even */
    assert_int_equal(mp_f32_to_bf16(1.01171875f), 0x3F82);  /* 1 + 3*2^-8: tie to even (up) */
    assert_int_equal(mp_f32_to_bf16(-123.5f), 0xC2F7);
    assert_true(isnan(mp_bf16_to_f32(mp_f32_to_bf16(NAN))));
}

static void check(const float *got, const float *want, int n, const char *what) {
    for (int i = 0; i < n; i++)
        if (got[i] != want[i]) fail_msg("%s: element %d = %.9g, expected %.9g", what, i, got[i], want[i]);
}

static void test_q8_0_q4_0_q4_1(void **state) {
    (void)state;
    uint8_t b[34];
    float y[32];
    /* Q8_0: d = 0x3800 = 0.5, qs = 0, 1, -1, 2, -2, ..., then 127, -128 at the end */
    b[0] = 0x00;
    b[1] = 0x38;
    for (int j = 0; j < 32; j++) b[2 + j] = (uint8_t)(int8_t)((j % 2 ? 1 : -1) * ((j + 1) / 2));
    b[2 + 30] = 127;
    b[2 + 31] = (uint8_t)-128;
    static const float w8[32] = {0,   0.5f, -0.5f, 1,    -1, 1.5f, -1.5f, 2,    -2, 2.5f, -2.5f, 3,    -3, 3.5f, -3.5f, 4,
                                 -4,  4.5f, -4.5f, 5,    -5, 5.5f, -5.5f, 6,    -6, 6.5f, -6.5f, 7,    -7, 7.5f, 63.5f, -64};
    mp_quant_dequant(y, b, MP_WT_Q8_0, 32);
    check(y, w8, 32, "Q8_0");
    /* Q4_0: d = 0x4000 = 2; qs[j] = j | (15-j)<<4 → y[j] = (j-8)*2, y[j+16] = (7-j)*2 */
    b[0] = 0x00;
    b[1] = 0x40;
    for (int j = 0; j < 16; j++) b[2 + j] = (uint8_t)(j | ((15 - j) << 4));
    static const float w4[32] = {-16, -14, -12, -10, -8, -6, -4, -2, 0,  2,  4,  6,   8,   10,  12,  14,
                                 14,  12,  10,  8,   6,  4,  2,  0,  -2, -4, -6, -8, -10, -12, -14, -16};
    mp_quant_dequant(y, b, MP_WT_Q4_0, 32);
    check(y, w4, 32, "Q4_0");
    /* Q4_1: d = 1 (0x3C00), m = -1 (0xBC00); qs[j] = j | (15-j)<<4 → y[j] = j-1, y[j+16] = 14-j */
    b[0] = 0x00;
    b[1] = 0x3C;
    b[2] = 0x00;
    b[3] = 0xBC;
    for (int j = 0; j < 16; j++) b[4 + j] = (uint8_t)(j | ((15 - j) << 4));
    static const float w41[32] = {-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
                                  14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, -1};
    mp_quant_dequant(y, b, MP_WT_Q4_1, 32);
    check(y, w41, 32, "Q4_1");
}

static void test_q5_0_q5_1(void **state) {
    (void)state;
    uint8_t b[24];
    float y[32];
    /* Q5_0: d = 0.5; qh = 0x0000FFFF (bit k = 5th bit of element k); qs[j] = j | j<<4.
     * element j<16: q = 16+j → (q-16)*0.5 = j/2; element j+16: q = j → (j-16)/2 */
    b[0] = 0x00;
    b[1] = 0x38;
    b[2] = 0xFF;
    b[3] = 0xFF;
    b[4] = 0x00;
    b[5] = 0x00;
    for (int j = 0; j < 16; j++) b[6 + j] = (uint8_t)(j | (j << 4));
    static const float w50[32] = {0,  0.5f, 1,  1.5f, 2,  2.5f, 3,  3.5f, 4,  4.5f, 5,  5.5f, 6,  6.5f, 7,  7.5f,
                                  -8, -7.5f, -7, -6.5f, -6, -5.5f, -5, -4.5f, -4, -3.5f, -3, -2.5f, -2, -1.5f, -1, -0.5f};
    mp_quant_dequant(y, b, MP_WT_Q5_0, 32);
    check(y, w50, 32, "Q5_0");
    /* Q5_1: d = 1, m = 2; qh = 0xAAAAAAAA (odd elements have the 5th bit); qs = 0 → odd 18, even 2 */
    b[0] = 0x00;
    b[1] = 0x3C;
    b[2] = 0x00;
    b[3] = 0x40;
    b[4] = b[5] = b[6] = b[7] = 0xAA;
    memset(b + 8, 0, 16);
    b[8] = 0x31; /* element 0: low nibble 1 → 1+2 = 3; element 16: high nibble 3 → 3+2 = 5 */
    float w51[32];
    for (int k = 0; k < 32; k++) w51[k] = k % 2 ? 18 : 2;
    w51[0] = 3;
    w51[16] = 5;
    mp_quant_dequant(y, b, MP_WT_Q5_1, 32);
    check(y, w51, 32, "Q5_1");
}

/* Q4_K / Q5_K scales: sc = 1,2,3,4,21,22,23,24 and m = 0,1,2,3,36,37,38,39 packed by hand. */
static const uint8_t k_scales[12] = {0x41, 0x42, 0x43, 0x44, 0x80, 0x81, 0x82, 0x83, 0x45, 0x56, 0x67, 0x78};

static void test_q4_k_q5_k(void **state) {
    (void)state;
    uint8_t b[176];
    float y[256], w[256];
    /* Q4_K: d = 1, dmin = 0.5; all qs bytes 0x52 (low nibble 2 → even sub-blocks, high 5 → odd).
     * sub-block j value d*sc_j*q - dmin*m_j: 2*1-0, 5*2-0.5, 2*3-1, 5*4-1.5, 2*21-18, 5*22-18.5, 2*23-19, 5*24-19.5 */
    static const float sub4[8] = {2, 9.5f, 5, 18.5f, 24, 91.5f, 27, 100.5f};
    memset(b, 0, sizeof b);
    b[0] = 0x00;
    b[1] = 0x3C;
    b[2] = 0x00;
    b[3] = 0x38;
    memcpy(b + 4, k_scales, 12);
    memset(b + 16, 0x52, 128);
    b[16] = 0x0F; /* element 0: 15*1 - 0 = 15; element 32: 0*2 - 0.5 = -0.5 */
    for (int k = 0; k < 256; k++) w[k] = sub4[k / 32];
    w[0] = 15;
    w[32] = -0.5f;
    mp_quant_dequant(y, b, MP_WT_Q4_K, 256);
    check(y, w, 256, "Q4_K");
    /* Q5_K: same d, dmin, scales; qh[l] = 0x01 (chunk 0 low half: +16), qh[3] |= 0x80 (chunk 3 high
     * half, l=3 → element 227: +16); qs all 0x52. sub-block 0 → 18; element 227 → 21*24 - 19.5 */
    memset(b, 0, sizeof b);
    b[1] = 0x3C;
    b[3] = 0x38;
    memcpy(b + 4, k_scales, 12);
    memset(b + 16, 0x01, 32);
    b[16 + 3] |= 0x80;
    memset(b + 48, 0x52, 128);
    for (int k = 0; k < 256; k++) w[k] = sub4[k / 32];
    for (int k = 0; k < 32; k++) w[k] = 18;
    w[227] = 484.5f;
    mp_quant_dequant(y, b, MP_WT_Q5_K, 256);
    check(y, w, 256, "Q5_K");
}

static void test_q6_k(void **state) {
    (void)state;
    uint8_t b[210];
    float y[256], w[256];
    /* ql = qh = 0 → q = -32 everywhere; scales sc[i] = i+1 except sc[15] = -3; d = 0.5.
     * Element e: half n = e/128, k = (e%128)/32, l = e%32 → scale index 8n + l/16 + 2k. */
    memset(b, 0, sizeof b);
    for (int i = 0; i < 16; i++) b[192 + i] = (uint8_t)(int8_t)(i + 1);
    b[192 + 15] = (uint8_t)(int8_t)-3;
    b[208] = 0x00;
    b[209] = 0x38;
    b[0] = 0x21;   /* ql[0]: low 1 (element 0), high 2 (element 64) */
    b[128] = 0xE4; /* qh[0]: bits 0-1 = 0 (element 0), 2-3 = 1 (element 32), 4-5 = 2 (element 64), 6-7 = 3 (element 96) */
    for (int e = 0; e < 256; e++) {
        int n = e / 128, k = (e % 128) / 32, l = e % 32, idx = 8 * n + l / 16 + 2 * k;
        w[e] = idx == 15 ? 48.0f : -16.0f * (float)(idx + 1);
    }
    w[0] = -15.5f; /* 0.5 * 1 * (1 - 32) */
    w[32] = -24;   /* 0.5 * 3 * (16 - 32) */
    w[64] = 5;     /* 0.5 * 5 * (2 + 32 - 32) */
    w[96] = 56;    /* 0.5 * 7 * (48 - 32) */
    /* spot checks of the index formula written out: e=16 → sc[1]; e=200 → sc[12]; e=255 → sc[15] */
    assert_true(w[16] == -32 && w[200] == -208 && w[255] == 48);
    mp_quant_dequant(y, b, MP_WT_Q6_K, 256);
    check(y, w, 256, "Q6_K");
}

static void test_q2_k_q3_k(void **state) {
    (void)state;
    uint8_t b[110];
    float y[256], w[256];
    /* Q2_K: d = 1, dmin = 0.5; scales[g] = ((g%4)+1) | (g/4)<<4; qs all 0xE4 (2-bit fields 0,1,2,3 at
     * shifts 0,2,4,6). Group g = e/16 has pair index j = (g%8)/2 → q = j; y = sc*j - 0.5*min: */
    static const float g2[16] = {0, 0, 3, 4, 1.5f, 3.5f, 8.5f, 11.5f, -1, -1, 2, 3, 0.5f, 2.5f, 7.5f, 10.5f};
    memset(b, 0, sizeof b);
    for (int g = 0; g < 16; g++) b[g] = (uint8_t)(((g % 4) + 1) | ((g / 4) << 4));
    memset(b + 16, 0xE4, 64);
    b[80] = 0x00;
    b[81] = 0x3C;
    b[82] = 0x00;
    b[83] = 0x38;
    for (int e = 0; e < 256; e++) w[e] = g2[e / 16];
    mp_quant_dequant(y, b, MP_WT_Q2_K, 256);
    check(y, w, 256, "Q2_K");
    /* Q3_K: d = 0.5; 6-bit scales s_g = 24 + g packed by hand: bytes 0..7 = (8+k) | k<<4,
     * bytes 8..11 = 0xA5 (high bits 1,1,2,2); hmask all set (no -4); qs all 0xE4 → q = j.
     * y = 0.5 * (s_g - 32) * j: */
    static const float g3[16] = {0, 0, -3, -2.5f, -4, -3, -3, -1.5f, 0, 0, 1, 1.5f, 4, 5, 9, 10.5f};
    memset(b, 0, sizeof b);
    memset(b, 0xFF, 32);
    memset(b + 32, 0xE4, 64);
    for (int k = 0; k < 8; k++) b[96 + k] = (uint8_t)((8 + k) | (k << 4));
    for (int k = 8; k < 12; k++) b[96 + k] = 0xA5;
    b[108] = 0x00;
    b[109] = 0x38;
    b[0] = 0xFE;  /* element 0: hmask bit 0 clear → q = 0 - 4; 0.5 * -8 * -4 = 16 */
    b[17] = 0xDF; /* bit 5 = half 1, pair 1, l = 17 → element 128+32+17 = 177: q = 1-4; 0.5*3*-3 */
    for (int e = 0; e < 256; e++) w[e] = g3[e / 16];
    w[0] = 16;
    w[177] = -4.5f;
    mp_quant_dequant(y, b, MP_WT_Q3_K, 256);
    check(y, w, 256, "Q3_K");
}

static void test_type_table(void **state) {
    (void)state;
    static const struct {
        MpWType t;
        size_t e, b;
    } want[] = {{MP_WT_F32, 1, 4},     {MP_WT_F16, 1, 2},     {MP_WT_BF16, 1, 2},    {MP_WT_Q4_0, 32, 18},
                {MP_WT_Q4_1, 32, 20},  {MP_WT_Q5_0, 32, 22},  {MP_WT_Q5_1, 32, 24},  {MP_WT_Q8_0, 32, 34},
                {MP_WT_Q2_K, 256, 84},  {MP_WT_Q3_K, 256, 110}, {MP_WT_Q4_K, 256, 144}, {MP_WT_Q5_K, 256, 176}, {MP_WT_Q6_K, 256, 210}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_int_equal(mp_quant_block_elems(want[i].t), want[i].e);
        assert_int_equal(mp_quant_block_bytes(want[i].t), want[i].b);
    }
    assert_false(mp_quant_known(9));  /* Q8_1 */
    assert_false(mp_quant_known(15)); /* Q8_K */
    assert_false(mp_quant_known(23)); /* IQ4_XS */
    size_t rb;
    assert_int_equal(mp_quant_row_bytes(MP_WT_Q4_K, 512, &rb), MP_OK);
    assert_int_equal(rb, 288);
    assert_int_equal(mp_quant_row_bytes(MP_WT_Q4_K, 100, &rb), MP_ERR);
    assert_int_equal(mp_quant_row_bytes(MP_WT_F32, UINT64_MAX / 2, &rb), MP_ERR);
    MpWType t;
    assert_int_equal(mp_quant_parse("q4_k", &t), MP_OK);
    assert_int_equal(t, MP_WT_Q4_K);
    assert_int_equal(mp_quant_parse("iq4_xs", &t), MP_ERR);
}

/* The writer's quantisers: decode(encode(x)) within the grid step of each type. */
static void test_encoders(void **state) {
    (void)state;
    enum { N = 1024 };
    float x[N], y[N];
    uint8_t buf[N * 4];
    for (int i = 0; i < N; i++) x[i] = (float)sin(i * 0.37) * (1 + (i % 7));
    MpWType ts[6] = {MP_WT_F32, MP_WT_F16, MP_WT_BF16, MP_WT_Q8_0, MP_WT_Q4_0, MP_WT_Q4_K};
    for (int k = 0; k < 6; k++) {
        assert_int_equal(mp_quant_encode(buf, x, ts[k], N), MP_OK);
        mp_quant_dequant(y, buf, ts[k], N);
        size_t be = mp_quant_block_elems(ts[k]);
        for (size_t b0 = 0; b0 < N; b0 += be) {
            float amax = 0, mn = 0, mx = 0;
            for (size_t i = b0; i < b0 + be; i++) {
                amax = fmaxf(amax, fabsf(x[i]));
                mn = fminf(mn, x[i]);
                mx = fmaxf(mx, x[i]);
            }
            /* tolerance per type: half a grid step plus f16 rounding of the scales */
            float tol = ts[k] == MP_WT_F32 ? 0 : ts[k] == MP_WT_F16 ? amax * 1e-3f : ts[k] == MP_WT_BF16 ? amax * 4e-3f
                      : ts[k] == MP_WT_Q8_0 ? amax / 127 * 0.51f + amax * 1e-3f
                      : ts[k] == MP_WT_Q4_0 ? amax / 8 * 1.01f + amax * 2e-3f /* grid -8d..7d: the side opposite the max clips by a step */
                      : (mx - mn) / 15 * 0.6f + (mx - mn) * 0.04f; /* Q4_K: 6-bit scales add error */
            for (size_t i = b0; i < b0 + be; i++)
                if (fabsf(y[i] - x[i]) > tol) fail_msg("%s: |%g - %g| > %g at %zu", mp_quant_name(ts[k]), y[i], x[i], tol, i);
        }
    }
    assert_int_equal(mp_quant_encode(buf, x, (MpWType)9, 256), MP_ERR); /* Q8_1: unknown */
    /* every type: relative RMS error of decode(encode(x)) within its grid's resolution */
    static const struct {
        MpWType t;
        double tol;
    } all[] = {{MP_WT_Q8_0, 0.01}, {MP_WT_Q6_K, 0.03}, {MP_WT_Q5_0, 0.05}, {MP_WT_Q5_1, 0.05}, {MP_WT_Q5_K, 0.06},
               {MP_WT_Q4_0, 0.1},  {MP_WT_Q4_1, 0.1},  {MP_WT_Q4_K, 0.12}, {MP_WT_Q3_K, 0.25}, {MP_WT_Q2_K, 0.45}};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        assert_int_equal(mp_quant_encode(buf, x, all[k].t, N), MP_OK);
        mp_quant_dequant(y, buf, all[k].t, N);
        double num = 0, den = 0;
        for (int i = 0; i < N; i++) {
            num += (double)(y[i] - x[i]) * (y[i] - x[i]);
            den += (double)x[i] * x[i];
        }
        double rel = sqrt(num / den);
        if (rel > all[k].tol) fail_msg("%s: relative RMS error %g > %g", mp_quant_name(all[k].t), rel, all[k].tol);
        print_message("%s: relative RMS error %.4f\n", mp_quant_name(all[k].t), rel);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalar_conversions), cmocka_unit_test(test_q8_0_q4_0_q4_1), cmocka_unit_test(test_q5_0_q5_1),
        cmocka_unit_test(test_q4_k_q5_k),          cmocka_unit_test(test_q6_k),           cmocka_unit_test(test_type_table),
        cmocka_unit_test(test_q2_k_q3_k),
        cmocka_unit_test(test_encoders),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
