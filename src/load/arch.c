/* arch.c — names, feature flags, sliding-window layers and RoPE tables: everything derived
 * from the hyperparameters alone; see arch.h.
 */
#include "load/arch.h"

#include <math.h>
#include <stdlib.h>

#include "core/err.h" /* mp_try_calloc, mp_err_set */

/* ================================================================ names */

static const char *arch_names[MP_ARCH_COUNT] = {"llama", "mistral", "qwen2", "qwen3", "phi3", "olmo2", "gptneox", "gemma2", "gemma3", "gemma", "mixtral", "qwen3moe", "qwen2moe"};
const char *mp_model_arch_name(MpArch a) { return (unsigned)a < MP_ARCH_COUNT ? arch_names[a] : "?"; }

const char *mp_model_rope_scaling_name(MpRopeScaling s) {
    switch (s) {
    case MP_ROPE_NONE: return "none";
    case MP_ROPE_LINEAR: return "linear";
    case MP_ROPE_LLAMA3: return "llama3";
    case MP_ROPE_FREQ_FACTORS: return "freq_factors";
    case MP_ROPE_LONGROPE: return "longrope";
    }
    return "?";
}

/* ================================================================ features */

void mp_model_arch_features(MpModel *m) {
    m->has_qkv_bias = m->arch == MP_ARCH_QWEN2 || m->arch == MP_ARCH_QWEN2MOE;
    m->has_qk_norm = m->arch == MP_ARCH_QWEN3 || m->arch == MP_ARCH_OLMO2 || m->arch == MP_ARCH_QWEN3MOE;
    m->qk_norm_whole = m->arch == MP_ARCH_OLMO2;
    m->no_pre_norm = m->arch == MP_ARCH_OLMO2;
    m->post_norm = m->arch == MP_ARCH_OLMO2 || m->arch == MP_ARCH_GEMMA2 || m->arch == MP_ARCH_GEMMA3;
    m->geglu = m->arch == MP_ARCH_GEMMA2 || m->arch == MP_ARCH_GEMMA3 || m->arch == MP_ARCH_GEMMA;
    m->has_qk_norm |= m->arch == MP_ARCH_GEMMA3;
    m->layer_norm = m->gelu_mlp = m->arch == MP_ARCH_GPTNEOX;
    m->has_qkv_bias |= m->arch == MP_ARCH_GPTNEOX;
}

/* ================================================================ sliding-window layers */

int mp_model_local_layers(MpModel *m, int period, double local_base, MpErr *e) {
    free(m->layer_local);
    free(m->inv_freq_local);
    m->inv_freq_local = NULL;
    m->layer_local = malloc((size_t)m->n_layers);
    if (!m->layer_local) return mp_err_set(e, "out of memory");
    for (int l = 0; l < m->n_layers; l++) m->layer_local[l] = (unsigned char)(period > 0 && (l + 1) % period != 0);
    if (local_base > 0) {
        if (!(local_base > 1)) return mp_err_set(e, "%s: the local RoPE base must be > 1", m->path);
        const int half = m->rot_dim / 2;
        m->inv_freq_local = mp_try_calloc((size_t)(half > 0 ? half : 1), sizeof(float));
        if (!m->inv_freq_local) return mp_err_set(e, "out of memory for the RoPE table");
        for (int i = 0; i < half; i++) m->inv_freq_local[i] = (float)(1.0 / pow(local_base, (2.0 * i) / m->rot_dim));
    }
    return MP_OK;
}

int mp_model_layer_window(const MpModel *m, int l) {
    if (m->sliding_window <= 0 || l < 0 || l >= m->n_layers) return 0;
    return !m->layer_local || m->layer_local[l] ? m->sliding_window : 0;
}

/* ================================================================ RoPE (spec §2.2) */

int mp_model_rope_init(MpModel *m, const double *short_factor, const double *long_factor, MpErr *e) {
    int half = m->rot_dim / 2;
    free(m->inv_freq);
    free(m->inv_freq_long);
    m->inv_freq_long = NULL;
    m->inv_freq = mp_try_calloc((size_t)(half > 0 ? half : 1), sizeof(float));
    if (!m->inv_freq) return mp_err_set(e, "out of memory for the RoPE table");
    if (m->rope_scaling == MP_ROPE_LONGROPE) {
        m->inv_freq_long = mp_try_calloc((size_t)(half > 0 ? half : 1), sizeof(float));
        if (!m->inv_freq_long) return mp_err_set(e, "out of memory for the RoPE table");
    }
    const double two_pi = 6.283185307179586476925286766559;
    for (int i = 0; i < half; i++) {
        double base = pow(m->rope_theta, (2.0 * i) / m->rot_dim), inv = 1.0 / base;
        switch (m->rope_scaling) {
        case MP_ROPE_NONE: break;
        case MP_ROPE_LINEAR: inv /= m->rope_factor; break;
        case MP_ROPE_LLAMA3: {
            double old = m->rope_orig_ctx, lo = m->rope_low_freq_factor, hi = m->rope_high_freq_factor;
            double low_wl = old / lo, high_wl = old / hi, wl = two_pi / inv;
            double inv_l = wl > low_wl ? inv / m->rope_factor : inv;
            double s = (old / wl - lo) / (hi - lo);
            double smoothed = (1 - s) * inv_l / m->rope_factor + s * inv_l;
            int medium = !(wl < high_wl) && !(wl > low_wl);
            inv = medium ? smoothed : inv_l;
            break;
        }
        case MP_ROPE_FREQ_FACTORS:
            if (!short_factor) return mp_err_set(e, "RoPE frequency factors missing");
            inv /= short_factor[i];
            break;
        case MP_ROPE_LONGROPE:
            if (!short_factor || !long_factor) return mp_err_set(e, "longrope factor lists missing");
            m->inv_freq_long[i] = (float)(1.0 / (long_factor[i] * base));
            inv = 1.0 / (short_factor[i] * base);
            break;
        }
        m->inv_freq[i] = (float)inv;
    }
    return MP_OK;
}
