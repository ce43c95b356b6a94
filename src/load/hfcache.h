/* hfcache.h — models named by their Hugging Face hub id ("org/name") found in the local HF hub
 * cache, offline: what `maskpos probe org/name` and maskpos.Model("org/name") open when no file or
 * folder of that name exists.
 *
 * Implements: the cache folder (HF_HUB_CACHE, else HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub,
 * else ~/.cache/huggingface/hub: huggingface_hub's order), the repository folder
 * models--org--name, its refs/<revision> (main by default; "org/name@rev" another branch or tag, or
 * a commit hash naming a snapshot) and the snapshot folder snapshots/<commit> it points to; a
 * clear one-line message naming what is missing (maskpos never downloads).
 * Does not: read the snapshot (load/model.c, tok/open.c do), follow the network.
 * Tested by: tests/test_hfcache.c (a cache folder the test builds; env variables; missing refs,
 * snapshots; the command and the C API on it); python/tests/test_hfcache.py.
 */
#ifndef MP_LOAD_HFCACHE_H
#define MP_LOAD_HFCACHE_H

#include <stddef.h>

#include "core/err.h" /* MpErr */

/* 1 when s reads as a hub id: "org/name" or "org/name@rev", letters, digits, '-', '_', '.' (not
 * leading '.' or '-', no ".."). */
int mp_hfcache_is_id(const char *s);

/* The snapshot folder of hub id `id` in the local cache into out (cap bytes). MP_OK, or MP_ERR
 * with a message naming the cache folder and what is missing there. */
int mp_hfcache_resolve(const char *id, char *out, size_t cap, MpErr *e);

/* The cache folder into out (the first of HF_HUB_CACHE, HF_HOME/hub, XDG_CACHE_HOME/huggingface/hub,
 * HOME/.cache/huggingface/hub that is set), and the variable it came from into *from. */
void mp_hfcache_dir(char *out, size_t cap, const char **from);

#endif
