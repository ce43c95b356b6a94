/* test_api.c — a program written against include/maskpos.h alone, as a library user would:
 * theory → simulate → statistics, checking the library's documented contracts (NaN above the
 * diagonal, rows of probabilities summing to 1, standard errors shrinking like 1/√B). */
#include "testutil.h"

#include "maskpos.h"

static void test_library_round_trip(void **state) {
    (void)state;
    MpErr e;
    MpTheory t;
    assert_int_equal(mp_theory_init(&t, 0.1, 6, &e), MP_OK);
    MpSimConfig c;
    mp_sim_config_default(&c);
    c.seq = 6;
    c.dim = 16;
    c.layers = 2;
    c.alpha = 0.1;
    double se_small = 0, se_big = 0;
    for (int k = 0; k < 2; k++) {
        c.batch = k ? 1600 : 400;
        MpSimResult r;
        assert_int_equal(mp_sim_run(&r, &c, &e), MP_OK);
        for (int i = 0; i < 6; i++) {
            double s = 0;
            for (int j = 0; j < 6; j++) {
                s += r.probs[i * 6 + j];
                if (j > i) assert_true(isnan(r.scores[i * 6 + j]));
            }
            assert_true(fabs(s - 1) < 1e-12);
        }
        double se = r.se[36 + 5 * 6 + 0];
        if (k) se_big = se;
        else se_small = se;
        mp_sim_result_free(&r);
    }
    /* 4× the sequences → about half the standard error */
    assert_true(se_big / se_small > 0.4 && se_big / se_small < 0.6);
    mp_theory_free(&t);
    /* bad configurations are rejected, not clamped */
    c.alpha = 1.0;
    MpSimResult r;
    assert_int_equal(mp_sim_run(&r, &c, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "alpha"));
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_library_round_trip)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
