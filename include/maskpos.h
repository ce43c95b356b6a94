/* maskpos.h — the public interface of libmaskpos (build/libmaskpos.a).
 *
 * Compile with -Iinclude -Isrc and link build/libmaskpos.a plus `pkg-config --libs cairo jansson
 * libpcre2-8 libutf8proc` and -lm (and -fopenmp when the library was built with OpenMP).
 * Each module header documents its functions; they are grouped here by pipeline stage.
 */
#ifndef MASKPOS_H
#define MASKPOS_H

/* core: errors (MpErr, MP_OK/MP_ERR), counter-based RNG, .npy files, JSON meta, progress */
#include "core/err.h"
#include "core/json.h"
#include "core/npy.h"
#include "core/progress.h"
#include "core/rng.h"
#include "core/util.h"

/* kernels: positional-map statistics (diagonal-mean normalisation, NRI) */
#include "kernels/posmap.h"

/* sim: the closed form and the Monte-Carlo parameter-free decoder */
#include "sim/simulate.h"
#include "sim/theory.h"

#endif
