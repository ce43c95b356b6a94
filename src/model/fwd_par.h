/* fwd_par.h — the parallel loops of the forward pass's CPU instances (src/model/fwd_cpu.c,
 * fwd_cpu_attn.c: each op loops inside itself; fwd.c has no loop): a loop runs in an OpenMP region
 * only when it has enough work and no region is active around it.
 *
 * Implements FWD_PAR_FOR(work, loop) and FWD_PAR_FOR2(work, loop): the for statement `loop` runs in
 * a parallel region when `work` (multiply-adds) exceeds FWD_PAR_MIN and no region is active
 * (mp_fwd_top_level), else in the calling thread, with the same bits: every iteration writes its
 * own elements. A worker of a sequence-parallel run (generate; probes of small models) must not
 * even open an if(false) region: libgomp builds a nested team of one for it, with two futex calls,
 * ~70 times per token (a quarter of the CPU of `generate` on stories260K). FWD_PAR_FOR2: two nested
 * loops, collapsed and handed out one item at a time (the attention's heads x row blocks).
 * Does not: choose arithmetic (the instance's kernels do).
 * Tested by: tests/test_model_fwd.c (1 and 2 threads, the same bytes).
 */
#ifndef MP_FWD_PAR_H
#define MP_FWD_PAR_H

#include "model/fwd_kernels.h" /* mp_fwd_top_level */

/* Parallel regions only pay off above this much work (multiply-adds); below it (tiny test
 * models) thread wake-ups on a loaded machine cost more than the loop. */
#define FWD_PAR_MIN 200000.0

#define FWD_PAR(pragma, work, ...)                                                                 \
    do {                                                                                          \
        if ((double)(work) > FWD_PAR_MIN && mp_fwd_top_level()) {                                 \
            _Pragma(pragma) __VA_ARGS__                                                           \
        } else {                                                                                  \
            __VA_ARGS__                                                                           \
        }                                                                                         \
    } while (0)
#define FWD_PAR_FOR(work, ...) FWD_PAR("omp parallel for schedule(static)", work, __VA_ARGS__)
#define FWD_PAR_FOR2(work, ...) FWD_PAR("omp parallel for collapse(2) schedule(dynamic, 1)", work, __VA_ARGS__)

#endif
