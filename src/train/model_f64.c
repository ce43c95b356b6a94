/* model_f64.c — the trainable model in double: instantiates model_impl.h with R = double.
 *
 * Implements: every mp_train_*_f64 function declared in train.h (see model_impl.h for the code).
 * Does not: anything else; this instance is the finite-difference reference of tests/test_train.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"    /* MP_ASSERT, mp_try_calloc, mp_err_set */
#include "train/train.h" /* declarations, layout */

#define MP_TRAIN_REAL double
#define MP_TRAIN_SUF _f64
#include "train/model_impl.h"
