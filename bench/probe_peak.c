/* probe_peak.c — f32 peak of this machine for bench/probe: independent vector FMA chains.
 *
 * Implements: every thread runs NACC independent chains acc = acc*m + c on 16-float vectors
 * (GCC vector extensions; -march=native and GNU mode contract them to one FMA each), so the
 * loop is bound by FMA throughput, not latency. Prints GFLOP/s (2 flops per lane per FMA) for
 * 1 thread and for all threads (OpenMP).
 * Does not: touch memory (an upper bound, as a dense matmul cannot exceed it).
 * Run: cc -std=gnu11 -O2 -march=native -fopenmp bench/probe_peak.c -o peak && ./peak
 */
#include <stdio.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

typedef float v16 __attribute__((vector_size(64)));
#define NACC 12

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static float chains(long iters) {
    v16 acc[NACC], m, c;
    for (int i = 0; i < 16; i++) {
        m[i] = 0.999999f;
        c[i] = 1e-7f;
    }
    for (int k = 0; k < NACC; k++) acc[k] = m * (float)(k + 1);
    for (long it = 0; it < iters; it++)
#pragma GCC unroll 12
        for (int k = 0; k < NACC; k++) acc[k] = acc[k] * m + c;
    float s = 0;
    for (int k = 0; k < NACC; k++)
        for (int i = 0; i < 16; i++) s += acc[k][i];
    return s;
}

static double run(int threads, long iters) {
    volatile float sink = 0;
    double t0 = now();
#pragma omp parallel num_threads(threads)
    {
        float s = chains(iters);
#pragma omp atomic
        sink += s;
    }
    double t = now() - t0;
    (void)sink;
    return (double)threads * iters * NACC * 16 * 2 / t / 1e9;
}

int main(void) {
    int nth = 1;
#ifdef _OPENMP
    nth = omp_get_max_threads();
#endif
    const long iters = 100000000L / NACC;
    run(1, iters / 10); /* warm up */
    double best1 = 0, bestn = 0;
    for (int r = 0; r < 3; r++) {
        double g1 = run(1, iters), gn = run(nth, iters);
        if (g1 > best1) best1 = g1;
        if (gn > bestn) bestn = gn;
    }
    printf("peak_gflops_1thread %.1f\npeak_gflops_all %.1f\nthreads %d\n", best1, bestn, nth);
    return 0;
}
