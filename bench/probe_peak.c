/* probe_peak.c — f32 FMA and bf16 dot-product peaks of this machine for bench/probe.
 *
 * Implements: every thread runs NACC independent chains on 16-float vectors, so the loop is bound
 * by instruction throughput, not latency:
 *   - f32 FMA: acc = acc*m + c (GCC vector extensions; -march=native and GNU mode contract them to
 *     one vfmadd each), 2 flops per lane;
 *   - bf16 (when the CPU has AVX512-BF16): acc = vdpbf16ps(acc, a, b), 32 bf16 pairs -> 16 f32
 *     lanes, 4 flops per lane (two multiplies, two adds), compiled with a target attribute and run
 *     only when cpuid says avx512bf16.
 * Prints GFLOP/s for 1 thread and for all threads (OpenMP), and GFLOP per CPU second of the
 * all-threads run (the per-core rate, robust to other jobs on the machine); the bf16 lines are "-"
 * without the instruction.
 * Does not: touch memory (an upper bound, as a dense matmul cannot exceed it).
 * Run: cc -std=gnu11 -O2 -march=native -fopenmp bench/probe_peak.c -o peak && ./peak
 */
#include <stdio.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#define PEAK_X86 1
#else
#define PEAK_X86 0
#endif

typedef float v16 __attribute__((vector_size(64)));
#define NACC 12

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* CPU seconds of the whole process (all threads): on a machine shared with other jobs, flops per
 * CPU second is the rate of the cycles this process got, which wall time is not. */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
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

#if PEAK_X86
/* NACC chains of vdpbf16ps: a, b are small bf16 values, so the sums stay finite. */
__attribute__((target("avx512f,avx512bf16"))) static float chains_bf16(long iters) {
    __m512 acc[NACC];
    const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3a83); /* ~1e-3 */
    const __m512bh b = (__m512bh)_mm512_set1_epi16(0x3a83);
    for (int k = 0; k < NACC; k++) acc[k] = _mm512_set1_ps((float)k);
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 12
        for (int k = 0; k < NACC; k++) acc[k] = _mm512_dpbf16_ps(acc[k], a, b);
    }
    float s = 0;
    for (int k = 0; k < NACC; k++) s += _mm512_reduce_add_ps(acc[k]);
    return s;
}
#endif

/* GFLOP/s of `threads` threads running kind 0 (f32 FMA) or 1 (bf16 dot products); *per_cpu_s
 * gets GFLOP per CPU second. */
static double run(int threads, long iters, int kind, double *per_cpu_s) {
    volatile float sink = 0;
    double t0 = now(), c0 = cpu_now();
#pragma omp parallel num_threads(threads)
    {
        float s = 0;
#if PEAK_X86
        s = kind ? chains_bf16(iters) : chains(iters);
#else
        s = chains(iters);
#endif
#pragma omp atomic
        sink += s;
    }
    double t = now() - t0, c = cpu_now() - c0;
    (void)sink;
    const double gflop = (double)threads * iters * NACC * 16 * (kind ? 4 : 2) / 1e9;
    if (per_cpu_s) *per_cpu_s = gflop / c;
    return gflop / t;
}

int main(void) {
    int nth = 1;
#ifdef _OPENMP
    nth = omp_get_max_threads();
#endif
    int bf16 = 0;
#if PEAK_X86
    __builtin_cpu_init();
    bf16 = __builtin_cpu_supports("avx512bf16") > 0;
#endif
    const long iters = 100000000L / NACC;
    run(1, iters / 10, 0, NULL); /* warm up */
    double best[2][3] = {{0, 0, 0}, {0, 0, 0}}; /* [kind][1 thread, all, per CPU second] */
    for (int r = 0; r < 3; r++)
        for (int kind = 0; kind <= bf16; kind++) {
            double pc;
            double g1 = run(1, iters, kind, NULL), gn = run(nth, iters, kind, &pc);
            if (g1 > best[kind][0]) best[kind][0] = g1;
            if (gn > best[kind][1]) best[kind][1] = gn;
            if (pc > best[kind][2]) best[kind][2] = pc;
        }
    printf("peak_gflops_1thread %.1f\npeak_gflops_all %.1f\npeak_gflops_per_cpu_s %.1f\nthreads %d\n", best[0][0], best[0][1],
           best[0][2], nth);
    if (bf16)
        printf("bf16_peak_gflops_1thread %.1f\nbf16_peak_gflops_all %.1f\nbf16_peak_gflops_per_cpu_s %.1f\n", best[1][0], best[1][1],
               best[1][2]);
    else printf("bf16_peak_gflops_1thread -\nbf16_peak_gflops_all -\nbf16_peak_gflops_per_cpu_s -\n");
    return 0;
}
