/* optim.c — AdamW, the learning-rate schedule and gradient clipping; see train.h.
 *
 * Implements: torch.optim.AdamW semantics (decoupled decay p <- p (1 - lr wd) before the Adam
 * update, bias corrections 1 - beta^t), warm-up + cosine schedule, clip_grad_norm_-style clipping
 * with the norm summed in double in a fixed order.
 * Does not: keep state (the caller owns m, v and the step counter).
 * Tested by: tests/test_train.c (tests/ref/train_ref.py runs torch's AdamW on the same gradients).
 */
#include <math.h>
#include <string.h>

#include "train/train.h" /* MpTrainOptConfig, MpTrainLayout */

void mp_train_opt_default(MpTrainOptConfig *o) {
    memset(o, 0, sizeof *o);
    o->lr = 3e-3;
    o->min_lr_frac = 0.1;
    o->warmup = 100;
    o->steps = 1000;
    o->beta1 = 0.9;
    o->beta2 = 0.95;
    o->eps = 1e-8;
    o->wd = 0.1;
    o->clip = 1.0;
}

const MpTrainRange mp_train_ranges[MP_TRAIN_NSETTINGS] = {
    [MP_TRAIN_SET_LR] = {"--lr", 1e-12, 1e38},
    [MP_TRAIN_SET_MIN_LR_FRAC] = {"--min-lr-frac", 0, 1},
    [MP_TRAIN_SET_WARMUP] = {"--warmup", 0, 1099511627776.0},
    [MP_TRAIN_SET_STEPS] = {"--steps", 1, 1099511627776.0},
    [MP_TRAIN_SET_WD] = {"--wd", 0, 1e6},
    [MP_TRAIN_SET_CLIP] = {"--clip", 0, 1e30},
    [MP_TRAIN_SET_BETA1] = {"beta1", 0, 0.999999},
    [MP_TRAIN_SET_BETA2] = {"--beta2", 0, 0.999999},
    [MP_TRAIN_SET_EPS] = {"eps", 1e-30, 1},
    [MP_TRAIN_SET_VAL_FRAC] = {"validation fraction", 1e-6, 0.5},
};

static int range_check(MpTrainSetting s, double v, MpErr *e) {
    const MpTrainRange *r = &mp_train_ranges[s];
    if (!(v >= r->lo && v <= r->hi)) return mp_err_set(e, "%s %g is outside [%g, %g]", r->name, v, r->lo, r->hi);
    return MP_OK;
}

int mp_train_opt_check(const MpTrainOptConfig *o, double val_frac, MpErr *e) {
    const double v[MP_TRAIN_NSETTINGS] = {
        [MP_TRAIN_SET_LR] = o->lr,       [MP_TRAIN_SET_MIN_LR_FRAC] = o->min_lr_frac,
        [MP_TRAIN_SET_WARMUP] = (double)o->warmup, [MP_TRAIN_SET_STEPS] = (double)o->steps,
        [MP_TRAIN_SET_WD] = o->wd,       [MP_TRAIN_SET_CLIP] = o->clip,
        [MP_TRAIN_SET_BETA1] = o->beta1, [MP_TRAIN_SET_BETA2] = o->beta2,
        [MP_TRAIN_SET_EPS] = o->eps,     [MP_TRAIN_SET_VAL_FRAC] = val_frac,
    };
    for (int s = 0; s < MP_TRAIN_NSETTINGS; s++)
        if (range_check((MpTrainSetting)s, v[s], e) != MP_OK) return MP_ERR;
    return MP_OK;
}

double mp_train_lr(const MpTrainOptConfig *o, int64_t step) {
    if (step < o->warmup) return o->lr * (double)(step + 1) / (double)o->warmup;
    double span = (double)(o->steps - o->warmup);
    double frac = span > 0 ? (double)(step - o->warmup) / span : 1.0;
    if (frac > 1) frac = 1;
    double lo = o->lr * o->min_lr_frac;
    return lo + 0.5 * (o->lr - lo) * (1.0 + cos(M_PI * frac));
}

double mp_train_clip(float *grads, size_t n, double clip) {
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += (double)grads[i] * (double)grads[i];
    double norm = sqrt(ss);
    if (clip > 0 && isfinite(norm)) {
        double coef = clip / (norm + 1e-6);
        if (coef < 1) {
            float cf = (float)coef;
            for (size_t i = 0; i < n; i++) grads[i] *= cf;
        }
    }
    return norm;
}

void mp_train_adamw(float *params, float *m, float *v, const float *grads, const MpTrainLayout *lay,
                    const MpTrainOptConfig *o, double lr, int64_t t) {
    const double bc1 = 1.0 - pow(o->beta1, (double)t), bc2 = 1.0 - pow(o->beta2, (double)t);
    const double b1 = o->beta1, b2 = o->beta2;
    for (int k = 0; k < lay->n; k++) {
        const MpTrainTensor *tn = &lay->t[k];
        const double decay = tn->decay ? 1.0 - lr * o->wd : 1.0;
        float *p = params + tn->off, *mm = m + tn->off, *vv = v + tn->off;
        const float *g = grads + tn->off;
#pragma omp parallel for if (tn->n > 32768)
        for (size_t i = 0; i < tn->n; i++) {
            double gi = g[i];
            double mi = b1 * mm[i] + (1 - b1) * gi;
            double vi = b2 * vv[i] + (1 - b2) * gi * gi;
            mm[i] = (float)mi;
            vv[i] = (float)vi;
            double denom = sqrt((double)vv[i]) / sqrt(bc2) + o->eps;
            p[i] = (float)((double)p[i] * decay - lr / bc1 * (double)mm[i] / denom);
        }
    }
}
