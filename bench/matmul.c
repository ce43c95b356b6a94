/* bench/matmul.c — the seven matmuls of one Llama-3.1-8B layer (q, k, v, o, gate, up, down: hidden
 * 4096, 8 kv heads of 128, FFN 14336) over T tokens, through every matmul kernel of maskpos this CPU
 * runs, on bf16 weights (each kernel, its bit class named) and on f32 weights, and through oneDNN's
 * bf16 matmul, the engine peer (compiled in with -DMP_BENCH_DNNL by bench/amx; oneDNN is never
 * linked into maskpos), at each thread count given (benchmark, not a test; docs/speed.md).
 *
 * Prints, per thread count, one row per engine: GFLOP/s of wall clock per shape group (q/o, k/v,
 * gate/up, down), the whole layer in wall clock and per CPU second (process CPU time: robust to
 * other jobs on a shared machine), and the ratio of that to oneDNN's; then, where AMX runs, the
 * peak of tdpbf16ps chains on one thread (vdpbf16ps and FMA: bench/probe_peak.c). Operands are
 * bf16 values (random), weights packed once per layout before the clock starts.
 *
 * usage: matmul [--T 1024] [--threads 1,2] [--kernels auto|all|NAME,...] [--reps 1]
 *   all: every kernel this CPU runs but the naive loops, the scalar build and the emulation
 *   (ref, scalar, amxemu: name them to time them).
 * Build: bench/amx does it (cc -O2 -fopenmp -Isrc bench/matmul.c build/libmaskpos.a ... [-ldnnl]).
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/fwd_amx.h"     /* mp_amx_usable, the tile layout's size */
#include "model/fwd_kernels.h" /* kernels, classes, packing */

#ifdef MP_BENCH_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define BENCH_X86 1
#else
#define BENCH_X86 0
#endif

/* The seven matmuls of a layer: y [T, O] = x [T, K] · Wᵀ, in shape groups as issue #37's table. */
typedef struct Shape {
    const char *name;
    int64_t O, K;
    int group; /* 0 q/o, 1 k/v, 2 gate/up, 3 down */
} Shape;
static const Shape shapes[] = {{"q", 4096, 4096, 0},     {"k", 1024, 4096, 1},     {"v", 1024, 4096, 1},    {"o", 4096, 4096, 0},
                               {"gate", 14336, 4096, 2}, {"up", 14336, 4096, 2}, {"down", 4096, 14336, 3}};
#define NSHAPES (int)(sizeof shapes / sizeof shapes[0])
static const char *const group_names[4] = {"q/o", "k/v", "gate/up", "down"};

static double now_wall(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double now_thread_cpu(void) { /* the peaks: one thread's CPU time (robust to other jobs) */
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double now_cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Deterministic bf16 values in about [-1, 1). */
static void fill(float *v, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = mp_fwd_bf16_to_f32(mp_fwd_bf16_from_f32((float)((int)(seed >> 9) - (1 << 22)) / (float)(1 << 22)));
    }
}

/* One engine's timings: wall seconds per group, and the whole layer's wall and CPU seconds. */
typedef struct Timing {
    double group_s[4], wall, cpu;
} Timing;

static double group_flops(int64_t T, int g) {
    double f = 0;
    for (int i = 0; i < NSHAPES; i++)
        if (shapes[i].group == g) f += 2.0 * (double)T * (double)shapes[i].O * (double)shapes[i].K;
    return f;
}

static void print_row(const char *engine, const char *bits, int64_t T, const Timing *tm, double ref_cpu_rate) {
    double all = 0;
    printf("  %-12s %-7s", engine, bits);
    for (int g = 0; g < 4; g++) {
        printf(" %9.1f", group_flops(T, g) / tm->group_s[g] / 1e9);
        all += group_flops(T, g);
    }
    const double rc = all / tm->cpu / 1e9;
    printf(" %9.1f %9.1f", all / tm->wall / 1e9, rc);
    if (ref_cpu_rate > 0) printf(" %8.2f", rc / ref_cpu_rate);
    else printf(" %8s", "-");
    printf("\n");
    fflush(stdout);
}

/* ================================================================ maskpos */

/* The layer's weights packed for one (dtype, layout); NULL entries until made. */
typedef struct Packed {
    MpFwdMat m[NSHAPES];
    void *block[NSHAPES];
} Packed;

static void pack_free(Packed *p) {
    for (int i = 0; i < NSHAPES; i++) free(p->block[i]);
    memset(p, 0, sizeof *p);
}

/* Every shape's W (the same bf16 values for every engine: fill seed 100 + shape) packed for
 * (dtype, layout), through the scratch w [O·K]. */
static int pack_make(Packed *p, int bf16, int layout, float *w) {
    memset(p, 0, sizeof *p);
    for (int i = 0; i < NSHAPES; i++) {
        const int64_t O = shapes[i].O, K = shapes[i].K;
        const size_t n = bf16 && layout == MP_FWD_LAYOUT_TILES ? mp_amx_weight_elems(O, K) : mp_fwd_mat_floats(O, K);
        p->block[i] = aligned_alloc(64, (n * (bf16 ? 2 : 4) + 63) / 64 * 64);
        if (!p->block[i]) return -1;
        fill(w, (size_t)(O * K), 100 + (uint32_t)i);
        MpFwdMat *m = &p->m[i];
        m->out = O;
        m->in = K;
        m->layout = bf16 ? layout : MP_FWD_LAYOUT_PANELS;
        if (bf16) {
            m->pb = p->block[i];
            for (int64_t r0 = 0; r0 < O; r0 += 32) mp_fwd_mat_pack_bf16_rows(m, w + r0 * K, r0, O - r0 < 32 ? O - r0 : 32);
        } else {
            m->p = p->block[i];
            mp_fwd_mat_pack(m, w, O, K);
        }
    }
    return 0;
}

static Timing time_maskpos(MpFwdKernel k, const Packed *p, float *y, const float *x, int64_t T, int reps) {
    Timing tm;
    memset(&tm, 0, sizeof tm);
    mp_fwd_matmul_kernel(k, y, shapes[0].O, x, shapes[0].K, &p->m[0], T); /* warm-up */
    const double w0 = now_wall(), c0 = now_cpu();
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < NSHAPES; i++) {
            const double t0 = now_wall();
            mp_fwd_matmul_kernel(k, y, shapes[i].O, x, shapes[i].K, &p->m[i], T);
            tm.group_s[shapes[i].group] += now_wall() - t0;
        }
    tm.wall = now_wall() - w0;
    tm.cpu = now_cpu() - c0;
    return tm;
}

/* ================================================================ oneDNN */

#ifdef MP_BENCH_DNNL
#define DN(call)                                                                                 \
    do {                                                                                         \
        const dnnl_status_t st_ = (call);                                                        \
        if (st_ != dnnl_success) {                                                               \
            fprintf(stderr, "bench/matmul: oneDNN: %s failed (status %d)\n", #call, (int)st_);   \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

/* One shape through oneDNN: src bf16 [T, K], weights bf16 [K, O] reordered once into the layout the
 * primitive asks for, dst f32 [T, O]. */
typedef struct DnnShape {
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, dst;
    const char *impl;
} DnnShape;

static void dnn_make(DnnShape *d, dnnl_engine_t eng, dnnl_stream_t str, const uint16_t *xb, const uint16_t *wb, float *y,
                     int64_t T, int64_t O, int64_t K) {
    dnnl_memory_desc_t smd, wmd_user, wmd_any, dmd;
    const dnnl_dims_t sd = {T, K}, wd = {K, O}, dd = {T, O};
    DN(dnnl_memory_desc_init_by_tag(&smd, 2, sd, dnnl_bf16, dnnl_ab));
    DN(dnnl_memory_desc_init_by_tag(&wmd_user, 2, wd, dnnl_bf16, dnnl_ba)); /* W [O, K] row-major is Wᵀ [K, O] in ba */
    DN(dnnl_memory_desc_init_by_tag(&wmd_any, 2, wd, dnnl_bf16, dnnl_format_tag_any));
    DN(dnnl_memory_desc_init_by_tag(&dmd, 2, dd, dnnl_f32, dnnl_ab));
    dnnl_matmul_desc_t md;
    DN(dnnl_matmul_desc_init(&md, &smd, &wmd_any, NULL, &dmd));
    dnnl_primitive_desc_t pd;
    DN(dnnl_primitive_desc_create(&pd, &md, NULL, eng, NULL));
    DN(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &d->impl));
    const dnnl_memory_desc_t *wmd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    dnnl_memory_t wuser;
    DN(dnnl_memory_create(&d->src, &smd, eng, (void *)xb));
    DN(dnnl_memory_create(&wuser, &wmd_user, eng, (void *)wb));
    DN(dnnl_memory_create(&d->wei, wmd, eng, DNNL_MEMORY_ALLOCATE));
    DN(dnnl_memory_create(&d->dst, &dmd, eng, y));
    dnnl_primitive_desc_t rpd;
    dnnl_primitive_t rp;
    DN(dnnl_reorder_primitive_desc_create(&rpd, &wmd_user, eng, wmd, eng, NULL));
    DN(dnnl_primitive_create(&rp, rpd));
    dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, wuser}, {DNNL_ARG_TO, d->wei}};
    DN(dnnl_primitive_execute(rp, str, 2, ra));
    DN(dnnl_stream_wait(str));
    DN(dnnl_primitive_destroy(rp));
    DN(dnnl_primitive_desc_destroy(rpd));
    DN(dnnl_memory_destroy(wuser));
    DN(dnnl_primitive_create(&d->prim, pd));
    DN(dnnl_primitive_desc_destroy(pd));
}

static Timing time_dnnl(DnnShape *ds, dnnl_stream_t str, int reps) {
    Timing tm;
    memset(&tm, 0, sizeof tm);
    for (int pass = 0; pass < 2; pass++) { /* pass 0: warm-up (oneDNN creates its kernels on first use) */
        const double w0 = now_wall(), c0 = now_cpu();
        for (int r = 0; r < (pass ? reps : 1); r++)
            for (int i = 0; i < NSHAPES; i++) {
                dnnl_exec_arg_t a[3] = {{DNNL_ARG_SRC, ds[i].src}, {DNNL_ARG_WEIGHTS, ds[i].wei}, {DNNL_ARG_DST, ds[i].dst}};
                const double t0 = now_wall();
                DN(dnnl_primitive_execute(ds[i].prim, str, 3, a));
                DN(dnnl_stream_wait(str));
                if (pass) tm.group_s[shapes[i].group] += now_wall() - t0;
            }
        tm.wall = now_wall() - w0;
        tm.cpu = now_cpu() - c0;
    }
    return tm;
}
#endif

/* ================================================================ instruction peaks (one thread) */

#if BENCH_X86
/* tdpbf16ps chains into four accumulator tiles (16 x 16 x 32 pairs: 16384 multiply-adds each). */
__attribute__((target("amx-tile,amx-bf16"))) static double peak_tdpbf16ps(void) {
    struct {
        uint8_t palette, start_row, reserved[14];
        uint16_t colsb[16];
        uint8_t rows[16];
    } cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
    static uint16_t ones[16 * 32] __attribute__((aligned(64)));
    for (int i = 0; i < 16 * 32; i++) ones[i] = 0x3f80;
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, ones, 64);
    _tile_loadd(5, ones, 64);
    _tile_loadd(6, ones, 64);
    _tile_loadd(7, ones, 64);
    const long iters = 2000000;
    const double t0 = now_thread_cpu();
    for (long n = 0; n < iters; n++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    const double s = now_thread_cpu() - t0;
    _tile_release();
    return 4.0 * iters * 2.0 * 16 * 16 * 32 / s / 1e9;
}
#endif

/* ================================================================ main */

static int parse_list(const char *s, int *out, int cap) {
    int n = 0;
    while (*s && n < cap) {
        out[n++] = atoi(s);
        s = strchr(s, ',');
        if (!s) break;
        s++;
    }
    return n;
}

int main(int argc, char **argv) {
    int64_t T = 1024;
    int threads[16], nth = 0, reps = 1;
    const char *kernels = "all";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--T") && i + 1 < argc) T = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) nth = parse_list(argv[++i], threads, 16);
        else if (!strcmp(argv[i], "--kernels") && i + 1 < argc) kernels = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: matmul [--T 1024] [--threads 1,2] [--kernels auto|all|NAME,...] [--reps 1]\n");
            return 2;
        }
    }
    if (!nth) threads[nth++] = omp_get_max_threads();
    if (T < 1 || reps < 1) return fprintf(stderr, "bench/matmul: --T and --reps must be positive\n"), 2;
    /* the kernels to time: all (but ref, scalar, amxemu), or a list */
    int want[MP_FWD_KERNEL_COUNT] = {0};
    for (int k = MP_FWD_KERNEL_REF; k < MP_FWD_KERNEL_COUNT; k++) {
        const char *nm = mp_fwd_kernel_name((MpFwdKernel)k);
        if (!strcmp(kernels, "all")) want[k] = k != MP_FWD_KERNEL_REF && k != MP_FWD_KERNEL_SCALAR && k != MP_FWD_KERNEL_AMXEMU;
        else {
            char buf[512];
            snprintf(buf, sizeof buf, ",%s,", kernels);
            char key[64];
            snprintf(key, sizeof key, ",%s,", nm);
            want[k] = strstr(buf, key) != NULL;
        }
        want[k] = want[k] && mp_fwd_kernel_available((MpFwdKernel)k);
    }
    const char *why;
    const int amx = mp_amx_usable(&why);
    char selfcheck[256] = "";
    if (amx) mp_amx_selfcheck(selfcheck, sizeof selfcheck);
    printf("matmul: the 7 matmuls of a Llama-3.1-8B layer over T=%lld tokens (%.1f GFLOP), GFLOP/s\n", (long long)T,
           (group_flops(T, 0) + group_flops(T, 1) + group_flops(T, 2) + group_flops(T, 3)) / 1e9);
    printf("  AMX: %s%s%s\n", amx ? "runs here" : why, amx ? "; " : "", selfcheck);
    const int kauto = mp_fwd_kernel_choose(NULL, 1, NULL, 0); /* before its note is read */
    if (!strcmp(kernels, "auto")) want[kauto] = 1;
    printf("  auto on bf16 weights: %s (class %s; %s)\n", mp_fwd_kernel_name((MpFwdKernel)kauto), mp_fwd_bits_name(mp_fwd_bits_default(1)),
           mp_fwd_kernel_pick_note(mp_fwd_bits_default(1), 1));

    const int64_t KMAX = 14336, OMAX = 14336;
    float *x = aligned_alloc(64, sizeof(float) * (size_t)(T * KMAX)), *y = aligned_alloc(64, sizeof(float) * (size_t)(T * OMAX));
    float *w = aligned_alloc(64, sizeof(float) * (size_t)(OMAX * KMAX));
    if (!x || !y || !w) return fprintf(stderr, "bench/matmul: out of memory\n"), 1;
    fill(x, (size_t)(T * KMAX), 1);

#ifdef MP_BENCH_DNNL
    /* oneDNN's operands: x and every W as bf16, weights reordered once per shape */
    uint16_t *xb = malloc(2 * (size_t)(T * KMAX));
    uint16_t *wb[NSHAPES];
    for (size_t i = 0; i < (size_t)(T * KMAX); i++) xb[i] = mp_fwd_bf16_from_f32(x[i]);
    dnnl_engine_t eng;
    dnnl_stream_t str;
    DN(dnnl_engine_create(&eng, dnnl_cpu, 0));
    DN(dnnl_stream_create(&str, eng, dnnl_stream_default_flags));
    DnnShape ds[NSHAPES];
    float *ydn[NSHAPES];
    for (int i = 0; i < NSHAPES; i++) { /* x read as [T, K] from its start, as the maskpos rows read it */
        const size_t n = (size_t)(shapes[i].O * shapes[i].K);
        fill(w, n, 100 + (uint32_t)i);
        wb[i] = malloc(2 * n);
        for (size_t j = 0; j < n; j++) wb[i][j] = mp_fwd_bf16_from_f32(w[j]);
        ydn[i] = malloc(sizeof(float) * (size_t)(T * shapes[i].O));
        dnn_make(&ds[i], eng, str, xb, wb[i], ydn[i], T, shapes[i].O, shapes[i].K);
        free(wb[i]);
    }
    printf("  oneDNN %d.%d (%s): %s\n", DNNL_VERSION_MAJOR, DNNL_VERSION_MINOR, "bf16 matmul, f32 out", ds[6].impl);
#else
    printf("  oneDNN: not built in (bench/amx compiles it in where libdnnl-dev is installed: scripts/setup.sh --bench)\n");
#endif

    for (int ti = 0; ti < nth; ti++) {
        omp_set_num_threads(threads[ti]);
        printf("\n%d thread%s:\n  %-12s %-7s %9s %9s %9s %9s %9s %9s %8s\n", threads[ti], threads[ti] == 1 ? "" : "s", "engine", "bits",
               group_names[0], group_names[1], group_names[2], group_names[3], "layer", "per-cpu-s", "x oneDNN");
        double ref = 0;
#ifdef MP_BENCH_DNNL
        Timing td = time_dnnl(ds, str, reps);
        ref = (group_flops(T, 0) + group_flops(T, 1) + group_flops(T, 2) + group_flops(T, 3)) * reps / td.cpu / 1e9;
        for (int g = 0; g < 4; g++) td.group_s[g] /= reps;
        td.wall /= reps, td.cpu /= reps;
        print_row("oneDNN", "bf16", T, &td, ref);
#endif
        for (int bf16 = 1; bf16 >= 0; bf16--)
            for (int layout = 0; layout < 2; layout++) {
                Packed p;
                int packed = 0;
                for (int k = MP_FWD_KERNEL_REF; k < MP_FWD_KERNEL_COUNT; k++) {
                    if (!want[k] || (bf16 && mp_fwd_kernel_layout((MpFwdKernel)k) != layout) || (!bf16 && layout)) continue;
                    if (!bf16 && k != MP_FWD_KERNEL_AVX512 && k != MP_FWD_KERNEL_AVX2 && k != MP_FWD_KERNEL_SCALAR && k != MP_FWD_KERNEL_REF)
                        continue; /* on f32 weights the others run one of these */
                    if (!packed && pack_make(&p, bf16, layout, w) != 0) return fprintf(stderr, "bench/matmul: out of memory\n"), 1;
                    packed = 1;
                    Timing tm = time_maskpos((MpFwdKernel)k, &p, y, x, T, reps);
                    for (int g = 0; g < 4; g++) tm.group_s[g] /= reps;
                    tm.wall /= reps, tm.cpu /= reps;
                    char name[64];
                    snprintf(name, sizeof name, "%s%s", mp_fwd_kernel_name((MpFwdKernel)k), bf16 ? "" : " f32");
                    print_row(name, bf16 ? mp_fwd_bits_name(mp_fwd_kernel_bits((MpFwdKernel)k, 1)) : "fma", T, &tm, ref);
                }
                if (packed) pack_free(&p);
            }
    }
#if BENCH_X86
    if (amx) printf("\ntdpbf16ps peak, one thread: %.1f GFLOP per CPU second (vdpbf16ps and FMA: bench/probe_peak.c)\n", peak_tdpbf16ps());
#endif
    free(x);
    free(y);
    free(w);
    return 0;
}
