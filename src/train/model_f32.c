/* model_f32.c — the trainable model in float: instantiates model_impl.h with R = float.
 *
 * Implements: every mp_train_*_f32 function declared in train.h (see model_impl.h for the code).
 * Does not: anything else; the training path uses this instance.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"    /* MP_ASSERT, mp_try_calloc, mp_err_set */
#include "train/train.h" /* declarations, layout */

#define MP_TRAIN_REAL float
#define MP_TRAIN_SUF _f32
#include "train/model_impl.h"
