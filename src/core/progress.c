/* progress.c — see progress.h. */
#include "core/progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/util.h" /* mp_time_now */

void mp_progress_init(MpProgress *p, const char *label, const char *unit, int64_t total) {
    memset(p, 0, sizeof *p);
    snprintf(p->label, sizeof p->label, "%s", label);
    snprintf(p->unit, sizeof p->unit, "%s", unit);
    p->total = total;
    p->start = p->last = mp_time_now();
    const char *force = getenv("MASKPOS_PROGRESS");
    p->forced = force && strcmp(force, "1") == 0;
    p->enabled = p->forced || (isatty(2) && !(force && strcmp(force, "0") == 0));
}

static void progress_fmt_time(char *buf, size_t cap, double s) {
    if (s < 0 || s > 1e7) {
        snprintf(buf, cap, "--:--");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
    else snprintf(buf, cap, "%02ld:%02ld", t / 60, t % 60);
}

void mp_progress_update(MpProgress *p, int64_t done) {
    if (!p->enabled) return;
    double now = mp_time_now();
    if ((!p->forced && now - p->start < 1.0) || (p->shown && now - p->last < 0.1 && done < p->total)) return;
    p->last = now;
    p->shown = 1;
    double frac = p->total > 0 ? (double)done / (double)p->total : 1.0;
    double el = now - p->start;
    double rate = el > 0 ? (double)done / el : 0;
    char eta[32], elapsed[32];
    progress_fmt_time(eta, sizeof eta, rate > 0 ? (double)(p->total - done) / rate : -1);
    progress_fmt_time(elapsed, sizeof elapsed, el);
    char bar[31];
    int fill = (int)(frac * 30);
    for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
    bar[30] = '\0';
    fprintf(stderr, "\r%s [%s] %3.0f%% %lld/%lld %s, %.0f %s/s, %s elapsed, ETA %s  ", p->label, bar,
            100 * frac, (long long)done, (long long)p->total, p->unit, rate, p->unit, elapsed, eta);
    fflush(stderr);
}

void mp_progress_finish(MpProgress *p) {
    if (!p->enabled) return;
    if (p->shown) {
        p->last = 0;
        mp_progress_update(p, p->total);
        fputc('\n', stderr);
    }
}
