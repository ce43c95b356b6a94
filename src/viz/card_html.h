/* card_html.h — the views of a model card (`maskpos card`, docs/card.md): one self-contained HTML
 * page, and the per-layer table as Markdown and as LaTeX, each rendered from the card's JSON (what
 * job/card_job.c builds from the run folders' meta.json: card.json).
 *
 * Implements:
 *   - mp_card_cols[]: the columns of the per-layer table, one row each (the pass it reads, the
 *     per-layer key of its number in card.json and of its standard error, its headings in text and
 *     LaTeX, its format, what it is): the HTML, Markdown and LaTeX tables and card.json's
 *     "columns" all read it;
 *   - mp_card_write_html: the page (no script, no network: the style inline, the map figures
 *     embedded as base64 PNG): what the card is, the runs, the per-layer table, what each
 *     counterfactual pass is, the maps, every other per-layer number of the runs, their files;
 *   - mp_card_write_md, mp_card_write_tex: the per-layer table to paste into a paper.
 *   Every file is written atomically (a temporary renamed into place).
 * Does not: run a probe, read run folders or compute a number (job/card_job.c; every number is a
 * probe's, from its meta.json).
 * Implemented by: card_html.c.
 * Tested by: tests/test_card.c (the page parsed by Python's html.parser, one row per layer; the
 * Markdown table's rows).
 *
 * Legend: L layers of a run; a card holds one or more models (runs), each with up to
 * MP_CARD_NPASS passes.
 */
#ifndef MP_VIZ_CARD_HTML_H
#define MP_VIZ_CARD_HTML_H

#include <jansson.h>

#include "core/err.h" /* MpErr */

/* The passes of a model's card: the probe as the model is, then the two counterfactuals, each a
 * separate probe pass (card.json: models[].passes[name]). */
typedef enum MpCardPass {
    MP_CARD_PASS_MAIN = 0,  /* "probe": the model as it is (causal mask, its RoPE) */
    MP_CARD_PASS_NO_ROPE,   /* "no-rope": probe --no-rope (only where the model has RoPE) */
    MP_CARD_PASS_BIDIR,     /* "bidirectional": probe --bidirectional (no causal mask) */
    MP_CARD_NPASS
} MpCardPass;

/* A pass's name (its card.json key and its folder in a card's run folder) and what it is. */
typedef struct MpCardPassDesc {
    const char *name;
    const char *flag; /* the probe flag of the pass ("" for the main pass) */
    const char *of;   /* what the pass is, for the card */
} MpCardPassDesc;
extern const MpCardPassDesc mp_card_passes[MP_CARD_NPASS];

/* One column of the per-layer table. */
typedef struct MpCardCol {
    int pass;           /* MpCardPass */
    const char *key;    /* its per-layer key in card.json (a meta.json key of the pass's run) */
    const char *se_key; /* the key of its standard error, or NULL */
    const char *head;   /* heading in HTML and Markdown */
    const char *tex;    /* heading in LaTeX */
    const char *fmt;    /* printf format of the number (and its standard error) */
    int verdict;        /* 1: a boolean shown as "resolved" / "not resolved" */
    const char *of;     /* what it is (the page's list, card.json's "columns") */
} MpCardCol;
extern const MpCardCol mp_card_cols[];
extern const int mp_card_ncols;

/* The cell of column c for layer slot l of model m (card.json's models[m]) into buf: the number,
 * "x ± se" with a standard error (tex: "x $\pm$ se"), the verdict, or "–" ("--" in tex) where the
 * run has none. Returns buf. */
const char *mp_card_cell(char *buf, size_t cap, const json_t *model, const MpCardCol *c, int l, int tex);

/* The page at path from card (card.json's object); figs[m] the PNG of model m's maps (NULL: none). */
int mp_card_write_html(const char *path, const json_t *card, const char *const *figs, MpErr *e);
/* The per-layer table: Markdown (a pipe table) and LaTeX (a tabular). */
int mp_card_write_md(const char *path, const json_t *card, MpErr *e);
int mp_card_write_tex(const char *path, const json_t *card, MpErr *e);

#endif
