/* hfcache.c — see hfcache.h. */
#include "load/hfcache.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* 1 for a character of an id part: letters, digits, '-', '_', '.'. */
static int id_char(int c) { return isalnum(c) || c == '-' || c == '_' || c == '.'; }

/* 1 when [s, s + n) is a valid id part (non-empty, no leading '.' or '-', no ".."). */
static int id_part(const char *s, size_t n) {
    if (!n || n > 96 || s[0] == '.' || s[0] == '-') return 0;
    for (size_t k = 0; k < n; k++)
        if (!id_char((unsigned char)s[k]) || (s[k] == '.' && k + 1 < n && s[k + 1] == '.')) return 0;
    return 1;
}

int mp_hfcache_is_id(const char *s) {
    const char *slash = strchr(s, '/'), *at = strchr(s, '@');
    if (!slash || strchr(slash + 1, '/')) return 0;
    const char *end = at ? at : s + strlen(s);
    if (at && (at < slash || !id_part(at + 1, strlen(at + 1)))) return 0;
    return id_part(s, (size_t)(slash - s)) && id_part(slash + 1, (size_t)(end - slash - 1));
}

void mp_hfcache_dir(char *out, size_t cap, const char **from) {
    const char *v;
    if ((v = getenv("HF_HUB_CACHE")) && *v) snprintf(out, cap, "%s", v), *from = "HF_HUB_CACHE";
    else if ((v = getenv("HF_HOME")) && *v) snprintf(out, cap, "%s/hub", v), *from = "HF_HOME";
    else if ((v = getenv("XDG_CACHE_HOME")) && *v) snprintf(out, cap, "%s/huggingface/hub", v), *from = "XDG_CACHE_HOME";
    else snprintf(out, cap, "%s/.cache/huggingface/hub", (v = getenv("HOME")) && *v ? v : "."), *from = "HOME";
}

static int is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* 1 when s is a 40-digit hexadecimal commit hash. */
static int is_commit(const char *s) {
    if (strlen(s) != 40) return 0;
    for (int k = 0; k < 40; k++)
        if (!isxdigit((unsigned char)s[k])) return 0;
    return 1;
}

int mp_hfcache_resolve(const char *id, char *out, size_t cap, MpErr *e) {
    char cache[3072], repo[3400], org[128], name[128], rev[128] = "main", ref[3600], commit[128];
    const char *from;
    if (!mp_hfcache_is_id(id)) return mp_err_set(e, "%s: not a file, a folder or a hub id (org/name)", id);
    const char *slash = strchr(id, '/'), *at = strchr(id, '@');
    snprintf(org, sizeof org, "%.*s", (int)(slash - id), id);
    snprintf(name, sizeof name, "%.*s", (int)((at ? at : id + strlen(id)) - slash - 1), slash + 1);
    if (at) snprintf(rev, sizeof rev, "%s", at + 1);
    mp_hfcache_dir(cache, sizeof cache, &from);
    if (snprintf(repo, sizeof repo, "%s/models--%s--%s", cache, org, name) >= (int)sizeof repo)
        return mp_err_set(e, "%s: the HF cache folder's path is too long (%s)", id, cache);
    if (!is_dir(repo))
        return mp_err_set(e, "%s: no such file or folder, and not in the local HF cache (%s, from %s: no models--%s--%s); "
                             "maskpos reads models offline: download it first (huggingface-cli download %s%s%s) or give "
                             "its folder", id, cache, from, org, name, id, at ? " --revision " : "", at ? at + 1 : "");
    if (is_commit(rev)) snprintf(commit, sizeof commit, "%s", rev);
    else {
        if (snprintf(ref, sizeof ref, "%s/refs/%s", repo, rev) >= (int)sizeof ref)
            return mp_err_set(e, "%s: the HF cache folder's path is too long (%s)", id, cache);
        FILE *f = fopen(ref, "r");
        size_t n = f ? fread(commit, 1, sizeof commit - 1, f) : 0;
        if (f) fclose(f);
        commit[n] = 0;
        while (n && isspace((unsigned char)commit[n - 1])) commit[--n] = 0;
        if (!f) return mp_err_set(e, "%s: the local HF cache has %s but no refs/%s (an interrupted download?)", id, repo, rev);
        if (!is_commit(commit)) return mp_err_set(e, "%s: %s does not hold a commit hash", id, ref);
    }
    int w = snprintf(out, cap, "%s/snapshots/%s", repo, commit);
    if (w < 0 || (size_t)w >= cap) return mp_err_set(e, "%s: the cache path is too long", id);
    if (!is_dir(out)) return mp_err_set(e, "%s: the local HF cache has no snapshot %s (refs/%s points to it)", id, out, rev);
    return MP_OK;
}
