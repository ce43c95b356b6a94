/* api_acc_check.h — the input check of maskpos_acc_add (api_acc_check.c). */
#ifndef MP_API_ACC_CHECK_H
#define MP_API_ACC_CHECK_H

#include <stdint.h>

#include "model/probe.h" /* MpProbeAcc */

/* A score of this magnitude or more is a mask or padding value (HF: finfo.min, -1e9, -10000). */
#define MP_API_ACC_MAX_SCORE 1e4

/* Every observed entry of x [B,H,S,S] (dt MASKPOS_F32 or _F64) of layer slot li, within each
 * sequence's length lens[b] (NULL: S): a score (finite, |v| < MP_API_ACC_MAX_SCORE) or, probs, a
 * probability in [0, 1]. MP_OK, or MP_ERR with the API's message naming the first bad entry and the
 * pattern of that sequence's bad entries (padding, left padding, a sliding window). */
int mp_api_acc_check(const MpProbeAcc *a, int li, const void *x, int dt, int64_t B, const int32_t *lens, const char *what,
                     int probs);

#endif
