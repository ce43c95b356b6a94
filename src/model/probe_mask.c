/* probe_mask.c — which entries of a layer's map the probe's accumulator (probe.h) observes: the
 * causal mask's and a sliding window's keys of each query row (mp_probe_acc_row_keys), and the
 * windows of a model's selected layers (mp_probe_acc_windows). Every statistic reads these (the
 * maps, --recency, the C API's input checks), and none calls back into the accumulator's table
 * (probe_acc.c), which calls the statistics: kept apart so that no two files call each other.
 * Tested by: tests/test_probe_window.c, tests/test_model_probe.c.
 *
 * Shape legend: L selected layers, S tokens per sequence.
 */
#include "model/probe.h"

void mp_probe_acc_windows(MpProbeAcc *a, const MpModel *m) {
    MP_ASSERT(a->n_done == 0);
    for (int l = 0; l < m->n_layers && l < 256; l++) {
        const int li = a->layer_of[l], W = mp_model_layer_window(m, l);
        if (li >= 0) a->window[li] = W > 0 && W < a->S ? W : 0;
    }
}

void mp_probe_acc_row_keys(const MpProbeAcc *a, int li, int i, int *lo, int *hi) {
    const int W = a->window[li];
    *lo = W && i - W + 1 > 0 ? i - W + 1 : 0;
    *hi = a->causal ? i + 1 : W && i + W < a->S ? i + W : a->S;
}
