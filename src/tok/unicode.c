/* unicode.c — Unicode as HF tokenizers sees it: normal forms, regex classes, UTF-8 helpers.
 *
 * Implements:
 *   - mp_tok_normalize: NFC, NFD, NFKC, NFKD via utf8proc (Unicode 15 tables) made equal to HF's
 *     normalizers (mp_tok_nfc: NFC), whose tables are older (about Unicode 10): code points HF
 *     does not know are cut out of the text and the pieces between them normalised separately. That is exact: to HF such a code point
 *     is an unassigned starter (combining class 0, no decomposition, no composition), which
 *     blocks reordering and composition across it. NFKC and NFKD also leave alone the
 *     compatibility characters of Unicode 12.0-15 (hf_compat_unknown) that HF's tables lack.
 *   - mp_tok_regex_patch: rewrites the general-category classes (\p{L}, \p{Lu}, \p{N}, \p{P},
 *     \p{S}, \p{M}, ... and \P{...}), \d, \s, \S of a tokenizer.json split pattern so PCRE2
 *     10.42 (Unicode 14 tables) classifies code points as HF's engine (Oniguruma, Unicode 16
 *     tables) does: code points added in Unicode 15/16 are listed explicitly, and \s becomes
 *     the explicit White_Space list (PCRE2's \s also holds U+180E, HF's does not).
 * The tables below were measured, not copied: every code point U+0000..U+10FFFF was run through
 * HF tokenizers 0.23.2 (npm binding: the Llama-3.1 pre-tokenizer on "a"X, "1"X, "1"XX"1" and the
 * NFC normalizer on X, NFD(X), "x"U+0345 X; all four normalizers on X, "x"U+0345 X, X U+0301,
 * "a"X U+0316, U+1100 X) and through PCRE2/utf8proc, and the differences kept. tests/test_tok.c
 * (the "unicode sweep" case) and tests/test_tok_nfkc.c check them again against the oracle.
 * Does not: case folding; script classes (\p{Han}, ...), \w, POSIX classes — left to
 * PCRE2's Unicode 14 tables; \P, \S, \D inside [...] are refused (PCRE2 10.42 has no class
 * subtraction).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tok/unicode.h" /* MpTokNfcWork, prototypes */

typedef struct MpTokRange {
    uint32_t lo, hi;
} MpTokRange;

/* ============================== tables measured against HF ============================== */

/* Per general category: code points in HF's \p{X} but not in PCRE2 10.42's (letters, marks,
 * numbers, punctuation, symbols of Unicode 15.0 and 16.0). One code point goes the other way:
 * U+1171E is Mn for PCRE2 and Mc for HF (handled in mp_tok_regex_patch). Measured with the
 * Split pre-tokenizer of HF tokenizers 0.23.2 on every code point, per category. */
static const MpTokRange hf_add_L[] = {
    {0x1C89, 0x1C8A}, {0xA7CB, 0xA7CD}, {0xA7DA, 0xA7DC}, {0x105C0, 0x105F3}, {0x10D4A, 0x10D65},
    {0x10D6F, 0x10D85}, {0x10EC2, 0x10EC4}, {0x1123F, 0x11240}, {0x11380, 0x11389}, {0x1138B, 0x1138B},
    {0x1138E, 0x1138E}, {0x11390, 0x113B5}, {0x113B7, 0x113B7}, {0x113D1, 0x113D1}, {0x113D3, 0x113D3},
    {0x11BC0, 0x11BE0}, {0x11F02, 0x11F02}, {0x11F04, 0x11F10}, {0x11F12, 0x11F33}, {0x1342F, 0x1342F},
    {0x13441, 0x13446}, {0x13460, 0x143FA}, {0x16100, 0x1611D}, {0x16D40, 0x16D6C}, {0x18CFF, 0x18CFF},
    {0x1B132, 0x1B132}, {0x1B155, 0x1B155}, {0x1DF25, 0x1DF2A}, {0x1E030, 0x1E06D}, {0x1E4D0, 0x1E4EB},
    {0x1E5D0, 0x1E5ED}, {0x1E5F0, 0x1E5F0}, {0x2B739, 0x2B739}, {0x2EBF0, 0x2EE5D}, {0x31350, 0x323AF},
};
static const MpTokRange hf_add_Lu[] = {
    {0x1C89, 0x1C89}, {0xA7CB, 0xA7CC}, {0xA7DA, 0xA7DA}, {0xA7DC, 0xA7DC}, {0x10D50, 0x10D65},
};
static const MpTokRange hf_add_Ll[] = {
    {0x1C8A, 0x1C8A}, {0xA7CD, 0xA7CD}, {0xA7DB, 0xA7DB}, {0x10D70, 0x10D85}, {0x1DF25, 0x1DF2A},
};
static const MpTokRange hf_add_Lm[] = {
    {0x10D4E, 0x10D4E}, {0x10D6F, 0x10D6F}, {0x16D40, 0x16D42}, {0x16D6B, 0x16D6C}, {0x1E030, 0x1E06D},
    {0x1E4EB, 0x1E4EB},
};
static const MpTokRange hf_add_Lo[] = {
    {0x105C0, 0x105F3}, {0x10D4A, 0x10D4D}, {0x10D4F, 0x10D4F}, {0x10EC2, 0x10EC4}, {0x1123F, 0x11240},
    {0x11380, 0x11389}, {0x1138B, 0x1138B}, {0x1138E, 0x1138E}, {0x11390, 0x113B5}, {0x113B7, 0x113B7},
    {0x113D1, 0x113D1}, {0x113D3, 0x113D3}, {0x11BC0, 0x11BE0}, {0x11F02, 0x11F02}, {0x11F04, 0x11F10},
    {0x11F12, 0x11F33}, {0x1342F, 0x1342F}, {0x13441, 0x13446}, {0x13460, 0x143FA}, {0x16100, 0x1611D},
    {0x16D43, 0x16D6A}, {0x18CFF, 0x18CFF}, {0x1B132, 0x1B132}, {0x1B155, 0x1B155}, {0x1E4D0, 0x1E4EA},
    {0x1E5D0, 0x1E5ED}, {0x1E5F0, 0x1E5F0}, {0x2B739, 0x2B739}, {0x2EBF0, 0x2EE5D}, {0x31350, 0x323AF},
};
static const MpTokRange hf_add_M[] = {
    {0x897, 0x897}, {0xCF3, 0xCF3}, {0xECE, 0xECE}, {0x10D69, 0x10D6D}, {0x10EFC, 0x10EFF},
    {0x11241, 0x11241}, {0x113B8, 0x113C0}, {0x113C2, 0x113C2}, {0x113C5, 0x113C5}, {0x113C7, 0x113CA},
    {0x113CC, 0x113D0}, {0x113D2, 0x113D2}, {0x113E1, 0x113E2}, {0x11F00, 0x11F01}, {0x11F03, 0x11F03},
    {0x11F34, 0x11F3A}, {0x11F3E, 0x11F42}, {0x11F5A, 0x11F5A}, {0x13440, 0x13440}, {0x13447, 0x13455},
    {0x1611E, 0x1612F}, {0x1E08F, 0x1E08F}, {0x1E4EC, 0x1E4EF}, {0x1E5EE, 0x1E5EF},
};
static const MpTokRange hf_add_Mn[] = {
    {0x897, 0x897}, {0xECE, 0xECE}, {0x10D69, 0x10D6D}, {0x10EFC, 0x10EFF}, {0x11241, 0x11241},
    {0x113BB, 0x113C0}, {0x113CE, 0x113CE}, {0x113D0, 0x113D0}, {0x113D2, 0x113D2}, {0x113E1, 0x113E2},
    {0x11F00, 0x11F01}, {0x11F36, 0x11F3A}, {0x11F40, 0x11F40}, {0x11F42, 0x11F42}, {0x11F5A, 0x11F5A},
    {0x13440, 0x13440}, {0x13447, 0x13455}, {0x1611E, 0x16129}, {0x1612D, 0x1612F}, {0x1E08F, 0x1E08F},
    {0x1E4EC, 0x1E4EF}, {0x1E5EE, 0x1E5EF},
};
static const MpTokRange hf_add_Mc[] = {
    {0xCF3, 0xCF3}, {0x113B8, 0x113BA}, {0x113C2, 0x113C2}, {0x113C5, 0x113C5}, {0x113C7, 0x113CA},
    {0x113CC, 0x113CD}, {0x113CF, 0x113CF}, {0x1171E, 0x1171E}, {0x11F03, 0x11F03}, {0x11F34, 0x11F35},
    {0x11F3E, 0x11F3F}, {0x11F41, 0x11F41}, {0x1612A, 0x1612C},
};
static const MpTokRange hf_add_N[] = {
    {0x10D40, 0x10D49}, {0x116D0, 0x116E3}, {0x11BF0, 0x11BF9}, {0x11F50, 0x11F59}, {0x16130, 0x16139},
    {0x16D70, 0x16D79}, {0x1CCF0, 0x1CCF9}, {0x1D2C0, 0x1D2D3}, {0x1E4F0, 0x1E4F9}, {0x1E5F1, 0x1E5FA},
};
static const MpTokRange hf_add_Nd[] = {
    {0x10D40, 0x10D49}, {0x116D0, 0x116E3}, {0x11BF0, 0x11BF9}, {0x11F50, 0x11F59}, {0x16130, 0x16139},
    {0x16D70, 0x16D79}, {0x1CCF0, 0x1CCF9}, {0x1E4F0, 0x1E4F9}, {0x1E5F1, 0x1E5FA},
};
static const MpTokRange hf_add_No[] = {
    {0x1D2C0, 0x1D2D3},
};
static const MpTokRange hf_add_P[] = {
    {0x1B4E, 0x1B4F}, {0x1B7F, 0x1B7F}, {0x10D6E, 0x10D6E}, {0x113D4, 0x113D5}, {0x113D7, 0x113D8},
    {0x11B00, 0x11B09}, {0x11BE1, 0x11BE1}, {0x11F43, 0x11F4F}, {0x16D6D, 0x16D6F}, {0x1E5FF, 0x1E5FF},
};
static const MpTokRange hf_add_Pd[] = {
    {0x10D6E, 0x10D6E},
};
static const MpTokRange hf_add_Po[] = {
    {0x1B4E, 0x1B4F}, {0x1B7F, 0x1B7F}, {0x113D4, 0x113D5}, {0x113D7, 0x113D8}, {0x11B00, 0x11B09},
    {0x11BE1, 0x11BE1}, {0x11F43, 0x11F4F}, {0x16D6D, 0x16D6F}, {0x1E5FF, 0x1E5FF},
};
static const MpTokRange hf_add_S[] = {
    {0x2427, 0x2429}, {0x2FFC, 0x2FFF}, {0x31E4, 0x31E5}, {0x31EF, 0x31EF}, {0x10D8E, 0x10D8F},
    {0x1CC00, 0x1CCEF}, {0x1CD00, 0x1CEB3}, {0x1F6DC, 0x1F6DC}, {0x1F774, 0x1F776}, {0x1F77B, 0x1F77F},
    {0x1F7D9, 0x1F7D9}, {0x1F8B2, 0x1F8BB}, {0x1F8C0, 0x1F8C1}, {0x1FA75, 0x1FA77}, {0x1FA87, 0x1FA89},
    {0x1FA8F, 0x1FA8F}, {0x1FAAD, 0x1FAAF}, {0x1FABB, 0x1FABF}, {0x1FAC6, 0x1FAC6}, {0x1FACE, 0x1FACF},
    {0x1FADA, 0x1FADC}, {0x1FADF, 0x1FADF}, {0x1FAE8, 0x1FAE9}, {0x1FAF7, 0x1FAF8}, {0x1FBCB, 0x1FBEF},
};
static const MpTokRange hf_add_Sm[] = {
    {0x10D8E, 0x10D8F},
};
static const MpTokRange hf_add_So[] = {
    {0x2427, 0x2429}, {0x2FFC, 0x2FFF}, {0x31E4, 0x31E5}, {0x31EF, 0x31EF}, {0x1CC00, 0x1CCEF},
    {0x1CD00, 0x1CEB3}, {0x1F6DC, 0x1F6DC}, {0x1F774, 0x1F776}, {0x1F77B, 0x1F77F}, {0x1F7D9, 0x1F7D9},
    {0x1F8B2, 0x1F8BB}, {0x1F8C0, 0x1F8C1}, {0x1FA75, 0x1FA77}, {0x1FA87, 0x1FA89}, {0x1FA8F, 0x1FA8F},
    {0x1FAAD, 0x1FAAF}, {0x1FABB, 0x1FABF}, {0x1FAC6, 0x1FAC6}, {0x1FACE, 0x1FACF}, {0x1FADA, 0x1FADC},
    {0x1FADF, 0x1FADF}, {0x1FAE8, 0x1FAE9}, {0x1FAF7, 0x1FAF8}, {0x1FBCB, 0x1FBEF},
};
static const MpTokRange hf_add_Cf[] = {
    {0x13439, 0x1343F},
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

typedef struct MpTokClassFix {
    const char *name;       /* \p{name} */
    const MpTokRange *add;  /* code points to add to PCRE2's class */
    size_t n_add;
    uint32_t remove;        /* one code point to take out (0: none) */
} MpTokClassFix;

#define FIX(name, tab) {name, tab, N_OF(tab), 0}
static const MpTokClassFix hf_class_fix[] = {
    FIX("L", hf_add_L),   FIX("Letter", hf_add_L), FIX("Lu", hf_add_Lu), FIX("Ll", hf_add_Ll),
    FIX("Lm", hf_add_Lm), FIX("Lo", hf_add_Lo),    FIX("M", hf_add_M),   FIX("Mark", hf_add_M),
    {"Mn", hf_add_Mn, N_OF(hf_add_Mn), 0x1171E},   FIX("Mc", hf_add_Mc), FIX("N", hf_add_N),
    FIX("Number", hf_add_N), FIX("Nd", hf_add_Nd), FIX("No", hf_add_No), FIX("P", hf_add_P),
    FIX("Punctuation", hf_add_P), FIX("Pd", hf_add_Pd), FIX("Po", hf_add_Po), FIX("S", hf_add_S),
    FIX("Symbol", hf_add_S), FIX("Sm", hf_add_Sm), FIX("So", hf_add_So), FIX("Cf", hf_add_Cf),
};
#undef FIX

static const MpTokClassFix *class_fix(const char *name, size_t n) {
    for (size_t i = 0; i < N_OF(hf_class_fix); i++)
        if (strlen(hf_class_fix[i].name) == n && !memcmp(hf_class_fix[i].name, name, n)) return &hf_class_fix[i];
    return NULL;
}

/* HF's \s, and Rust's char::is_whitespace: the Unicode White_Space property. */
static const MpTokRange hf_white_space[] = {
    {0x9, 0xD},       {0x20, 0x20},     {0x85, 0x85},     {0xA0, 0xA0},     {0x1680, 0x1680},
    {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
};

/* Code points HF's NFC does not know but utf8proc normalises: marks with a nonzero combining
 * class in utf8proc that HF leaves in place (measured), the Dives Akuru pair U+11935 U+11930 →
 * U+11938 (Unicode 13), and whole blocks of scripts added in Unicode 15/16 (Kawi, Nag Mundari,
 * Todhri, Garay, Tulu-Tigalari, Sunuwar, Gurung Khema, Kirat Rai, Ol Onal) so that a newer
 * utf8proc cannot start composing them. */
static const MpTokRange hf_nfc_unknown[] = {
    {0x7FD, 0x7FD},     {0x898, 0x89F},     {0x8CA, 0x8D3},     {0x9FE, 0x9FE},     {0xC3C, 0xC3C},
    {0xD3B, 0xD3C},     {0xEBA, 0xEBA},     {0x1715, 0x1715},   {0x1ABF, 0x1ACE},   {0x1DF6, 0x1DFA},
    {0xA82C, 0xA82C},   {0x105C0, 0x105FF}, {0x10D24, 0x10D27}, {0x10D40, 0x10D8F}, {0x10EAB, 0x10EAC},
    {0x10EFD, 0x10EFF}, {0x10F46, 0x10F50}, {0x10F82, 0x10F85}, {0x11070, 0x11070}, {0x1133B, 0x1133B},
    {0x11380, 0x113FF}, {0x1145E, 0x1145E}, {0x11839, 0x1183A}, {0x11930, 0x11930}, {0x11935, 0x11935},
    {0x11938, 0x11938}, {0x1193D, 0x1193E}, {0x11943, 0x11943}, {0x119E0, 0x119E0}, {0x11A34, 0x11A34},
    {0x11A47, 0x11A47}, {0x11A99, 0x11A99}, {0x11BC0, 0x11BFF}, {0x11D42, 0x11D42}, {0x11D44, 0x11D45},
    {0x11D97, 0x11D97}, {0x11F00, 0x11F5F}, {0x16100, 0x1613F}, {0x16D40, 0x16D7F}, {0x16FF0, 0x16FF1},
    {0x1E08F, 0x1E08F}, {0x1E130, 0x1E136}, {0x1E2AE, 0x1E2AE}, {0x1E2EC, 0x1E2EF}, {0x1E4D0, 0x1E4FF},
    {0x1E5D0, 0x1E5FF},
};

/* Code points with a compatibility decomposition in utf8proc (Unicode 15) that HF's NFKC and
 * NFKD leave alone, as unassigned starters (their tables predate Unicode 12.1): U+32FF SQUARE ERA
 * NAME REIWA (12.1), U+A7F2..A7F4 and U+10781..107BA modifier letters (14), U+AB69 (13), U+1E030..
 * 1E06D Cyrillic modifier letters (15), U+1F16C RAISED MR SIGN (12.0), U+1FBF0..1FBF9 segmented
 * digits (13). Measured on every code point in the same contexts as hf_nfc_unknown; with this
 * table (and hf_nfc_unknown) all four forms agree with HF on every code point. */
static const MpTokRange hf_compat_unknown[] = {
    {0x32FF, 0x32FF},   {0xA7F2, 0xA7F4},   {0xAB69, 0xAB69}, {0x10781, 0x10785}, {0x10787, 0x107B0},
    {0x107B2, 0x107BA}, {0x1E030, 0x1E06D}, {0x1F16C, 0x1F16C}, {0x1FBF0, 0x1FBF9},
};

static int range_has(const MpTokRange *r, size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < r[mid].lo) hi = mid;
        else if (cp > r[mid].hi) lo = mid + 1;
        else return 1;
    }
    return 0;
}

int mp_tok_is_white_space(uint32_t cp) { return range_has(hf_white_space, N_OF(hf_white_space), cp); }

int mp_tok_is_word_char(uint32_t cp) { /* Rust regex \w: Alphabetic, M, Nd, Pc, Join_Control */
    if (cp == '_' || cp == 0x200C || cp == 0x200D) return 1;
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) ||
           (c >= UTF8PROC_CATEGORY_MN && c <= UTF8PROC_CATEGORY_ME) || c == UTF8PROC_CATEGORY_ND ||
           c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_PC;
}

/* ===================================== UTF-8 ===================================== */

int mp_tok_utf8_next(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned c = s[0];
    if (c < 0x80 || n < 2) {
        *cp = c;
        return 1;
    }
    if (c < 0xE0) {
        *cp = ((c & 0x1Fu) << 6) | (s[1] & 0x3Fu);
        return 2;
    }
    if (c < 0xF0 || n < 4) {
        *cp = ((c & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (n > 2 ? (s[2] & 0x3Fu) : 0);
        return n > 2 ? 3 : 2;
    }
    *cp = ((c & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
    return 4;
}

int mp_tok_utf8_put(unsigned char *b, uint32_t cp) {
    if (cp < 0x80) {
        b[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        b[0] = (unsigned char)(0xC0 | (cp >> 6));
        b[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        b[0] = (unsigned char)(0xE0 | (cp >> 12));
        b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    b[0] = (unsigned char)(0xF0 | (cp >> 18));
    b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    b[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ================================ normal forms ================================ */

/* utf8proc options of each form (MP_TOK_NF_*), index = form. */
static const utf8proc_option_t nf_opts[] = {
    0,
    UTF8PROC_STABLE | UTF8PROC_COMPOSE,                    /* NFC */
    UTF8PROC_STABLE | UTF8PROC_DECOMPOSE,                  /* NFD */
    UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT,  /* NFKC */
    UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT, /* NFKD */
};
static const char *const nf_names[] = {"", "NFC", "NFD", "NFKC", "NFKD"};

/* The normal form of one piece with no HF-unknown code point in it, through utf8proc. */
static int nf_piece(MpTokBuf *out, const char *s, size_t n, int form, MpTokNfcWork *w, MpErr *e) {
    if (n == 0) return MP_OK;
    const utf8proc_option_t opt = nf_opts[form];
    for (;;) {
        utf8proc_ssize_t k = utf8proc_decompose((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n,
                                                (utf8proc_int32_t *)w->cps, (utf8proc_ssize_t)w->cap, opt);
        if (k < 0) return mp_err_set(e, "%s: %s", nf_names[form], utf8proc_errmsg(k));
        if ((size_t)k <= w->cap) {
            utf8proc_ssize_t m = utf8proc_reencode((utf8proc_int32_t *)w->cps, k, opt);
            if (m < 0) return mp_err_set(e, "%s: %s", nf_names[form], utf8proc_errmsg(m));
            return mp_tok_buf_append(out, w->cps, (size_t)m, e);
        }
        size_t cap = (size_t)k + 64, bytes;
        if (mp_size_mul(cap, sizeof(int32_t), &bytes) != MP_OK) return mp_err_set(e, "%s: text too long", nf_names[form]);
        int32_t *p = mp_try_malloc(bytes);
        if (!p) return mp_err_set(e, "%s: out of memory (%zu bytes)", nf_names[form], bytes);
        free(w->cps);
        w->cps = p;
        w->cap = cap;
    }
}

/* 1 when HF's tables do not know cp for this form (it is then left alone and cuts the text). */
static int nf_unknown(uint32_t cp, int form) {
    if (cp < 0x7FD) return 0;
    if (range_has(hf_nfc_unknown, N_OF(hf_nfc_unknown), cp)) return 1;
    return (form == MP_TOK_NF_KC || form == MP_TOK_NF_KD) && range_has(hf_compat_unknown, N_OF(hf_compat_unknown), cp);
}

int mp_tok_normalize(MpTokBuf *out, const char *s, size_t n, int form, MpTokNfcWork *w, MpErr *e) {
    MP_ASSERT(form >= MP_TOK_NF_C && form <= MP_TOK_NF_KD);
    const unsigned char *u = (const unsigned char *)s;
    /* Fast path: code points below U+0300 are never changed by NFC and never combine with what
     * precedes them (a text without a lead byte >= 0xCC is already NFC); below U+00A0 none has
     * a decomposition of any kind (NFD, NFKC, NFKD: lead bytes below 0xC2). */
    unsigned limit = form == MP_TOK_NF_C ? 0xCC : 0xC2;
    size_t i = 0;
    while (i < n && u[i] < limit) i++;
    if (i == n) return mp_tok_buf_append(out, s, n, e);
    size_t start = 0;
    i = 0;
    while (i < n) {
        uint32_t cp;
        int l = mp_tok_utf8_next(u + i, n - i, &cp);
        if (nf_unknown(cp, form)) {
            if (nf_piece(out, s + start, i - start, form, w, e) != MP_OK) return MP_ERR;
            if (mp_tok_buf_append(out, s + i, (size_t)l, e) != MP_OK) return MP_ERR;
            start = i + (size_t)l;
        }
        i += (size_t)l;
    }
    return nf_piece(out, s + start, n - start, form, w, e);
}

int mp_tok_nfc(MpTokBuf *out, const char *s, size_t n, MpTokNfcWork *w, MpErr *e) {
    return mp_tok_normalize(out, s, n, MP_TOK_NF_C, w, e);
}

void mp_tok_nfc_work_free(MpTokNfcWork *w) {
    free(w->cps);
    w->cps = NULL;
    w->cap = 0;
}

/* ================================ regex rewrite ================================ */

static int emit(MpTokBuf *out, const char *s, MpErr *e) { return mp_tok_buf_append(out, s, strlen(s), e); }

static int emit_ranges(MpTokBuf *out, const MpTokRange *r, size_t n, MpErr *e) {
    char tmp[48];
    for (size_t i = 0; i < n; i++) {
        if (r[i].lo == r[i].hi) snprintf(tmp, sizeof tmp, "\\x{%X}", (unsigned)r[i].lo);
        else snprintf(tmp, sizeof tmp, "\\x{%X}-\\x{%X}", (unsigned)r[i].lo, (unsigned)r[i].hi);
        if (emit(out, tmp, e) != MP_OK) return MP_ERR;
    }
    return MP_OK;
}

/* Emits the body of a class for \p{X} (PCRE2's class plus the code points HF adds) or, with
 * fix NULL, HF's \s spelled out. */
static int emit_class_body(MpTokBuf *out, const MpTokClassFix *fix, const char *name, size_t nl, MpErr *e) {
    if (!fix) return emit_ranges(out, hf_white_space, N_OF(hf_white_space), e);
    if (emit(out, "\\p{", e) != MP_OK || mp_tok_buf_append(out, name, nl, e) != MP_OK || emit(out, "}", e) != MP_OK)
        return MP_ERR;
    return emit_ranges(out, fix->add, fix->n_add, e);
}

int mp_tok_regex_patch(MpTokBuf *out, const char *p, size_t n, MpErr *e) {
    int in_class = 0;
    size_t i = 0;
    while (i < n) {
        char c = p[i];
        if (c == '\\' && i + 1 < n) {
            char d = p[i + 1];
            int rewrite = 0, negated = 0;
            const MpTokClassFix *fix = NULL; /* NULL with rewrite: \s */
            const char *name = NULL;
            size_t nl = 0, len = 2;
            if ((d == 'p' || d == 'P') && i + 2 < n && p[i + 2] == '{') {
                const char *close = memchr(p + i + 3, '}', n - i - 3);
                if (!close) return mp_err_set(e, "split pattern: unterminated \\%c{", d);
                name = p + i + 3;
                nl = (size_t)(close - name);
                len = 4 + nl;
                fix = class_fix(name, nl);
                rewrite = fix != NULL;
                negated = d == 'P';
            } else if (d == 's' || d == 'S') { /* HF's \s: White_Space, spelled out */
                rewrite = 1;
                negated = d == 'S';
            } else if (d == 'd' || d == 'D') { /* \d is \p{Nd} in both engines (UCP) */
                name = "Nd";
                nl = 2;
                fix = class_fix(name, nl);
                rewrite = 1;
                negated = d == 'D';
            } else if (d == 'Q') { /* \Q...\E: copied verbatim */
                const char *end = NULL;
                for (size_t j = i + 2; j + 1 < n; j++)
                    if (p[j] == '\\' && p[j + 1] == 'E') {
                        end = p + j + 2;
                        break;
                    }
                len = end ? (size_t)(end - (p + i)) : n - i;
            }
            uint32_t rm = fix ? fix->remove : 0;
            if (!rewrite) {
                if (mp_tok_buf_append(out, p + i, len, e) != MP_OK) return MP_ERR;
            } else if (in_class) {
                /* inside [...] code points can be added but not taken out: \P, \S, \D and
                 * the one-point removal of Mn cannot be expressed in PCRE2 10.42 */
                if (negated)
                    return mp_err_set(e, "split pattern: \\%c inside a character class is not supported", d);
                if (emit_class_body(out, fix, name, nl, e) != MP_OK) return MP_ERR;
            } else {
                char lookahead[40] = "";
                if (rm) snprintf(lookahead, sizeof lookahead, negated ? "(?:\\x{%X}|" : "(?:(?!\\x{%X})", (unsigned)rm);
                if (emit(out, lookahead, e) != MP_OK || emit(out, negated ? "[^" : "[", e) != MP_OK ||
                    emit_class_body(out, fix, name, nl, e) != MP_OK || emit(out, rm ? "])" : "]", e) != MP_OK)
                    return MP_ERR;
            }
            i += len;
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = 1;
            size_t j = i + 1;
            if (j < n && p[j] == '^') j++;
            if (j < n && p[j] == ']') j++; /* a leading ']' is a literal */
            if (mp_tok_buf_append(out, p + i, j - i, e) != MP_OK) return MP_ERR;
            i = j;
            continue;
        }
        if (c == '[' && in_class && i + 1 < n && p[i + 1] == ':') { /* POSIX class [:name:] */
            const char *end = NULL;
            for (size_t j = i + 2; j + 1 < n; j++)
                if (p[j] == ':' && p[j + 1] == ']') {
                    end = p + j + 2;
                    break;
                }
            size_t len = end ? (size_t)(end - (p + i)) : 1;
            if (mp_tok_buf_append(out, p + i, len, e) != MP_OK) return MP_ERR;
            i += len;
            continue;
        }
        if (c == ']' && in_class) in_class = 0;
        if (mp_tok_buf_append(out, p + i, 1, e) != MP_OK) return MP_ERR;
        i++;
    }
    return mp_tok_buf_append(out, "", 0, e); /* allocates the NUL of an empty pattern */
}
