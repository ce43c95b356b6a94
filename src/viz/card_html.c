/* card_html.c — the views of a model card from its JSON (viz/card_html.h): the page, the Markdown
 * and the LaTeX table. Every number printed here is read from card.json, which holds the probe
 * runs' own meta.json numbers (job/card_job.c); nothing is computed.
 * Tested by: tests/test_card.c.
 *
 * ================================================================ layout
 *   tables   the passes, the columns of the per-layer table, one cell
 *   html     the page: head, runs, per-layer table, passes, maps, other numbers, files
 *   text     Markdown and LaTeX
 */
#include "viz/card_html.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/util.h"   /* MpAtomicFile */
#include "viz/report.h"  /* mp_html_base64_file */
#include "viz/view.h"    /* mp_html_text: escaping */

/* ================================================================ tables */

const MpCardPassDesc mp_card_passes[MP_CARD_NPASS] = {
    [MP_CARD_PASS_MAIN] = {"probe", "",
                           "the model as it is: causal mask, its own positional encoding (RoPE where it has it)"},
    [MP_CARD_PASS_NO_ROPE] = {"no-rope", "--no-rope",
                              "counterfactual: the same probe with queries and keys not rotated (RoPE removed, "
                              "the causal mask kept); a separate pass, run only where the model has RoPE"},
    [MP_CARD_PASS_BIDIR] = {"bidirectional", "--bidirectional",
                            "counterfactual: the same probe without the causal mask (every query sees every key, "
                            "RoPE kept); a separate pass"},
};

#define M MP_CARD_PASS_MAIN
#define NR MP_CARD_PASS_NO_ROPE
#define BD MP_CARD_PASS_BIDIR
const MpCardCol mp_card_cols[] = {
    {M, "nri", NULL, "NRI", "NRI", "%.4f", 0, "non-relative index of the mean map (docs/metrics.md): the share of the "
                                             "centred map's power that is not a function of i - j"},
    {M, "nri_corrected", NULL, "NRI corr.", "NRI$_\\mathrm{corr}$", "%.4f", 0,
     "the NRI with the noise power of the mean map taken out of numerator and denominator"},
    {M, "residue_block_z", NULL, "block z", "block $z$", "%.2f", 0,
     "the residue's block test: rms over a 16x16 grid of block means in units of their standard error; about 1 for noise"},
    {M, "residue_noise.block_z", NULL, "noise z", "noise $z$", "%.2f", 0,
     "the block test's noise level: rms block z of sign-flipped sums (pure noise with the data's own tails)"},
    {M, "residue_resolved", NULL, "verdict", "verdict", NULL, 1,
     "resolved: block z above its noise level plus the margin, with enough sequences"},
    {M, "recency_probability", "recency_probability_se", "recency P", "recency $P$", "%.4f", 0,
     "share of key triples j < k < i with score(i,k) > score(i,j) (0.5: no preference for recent keys), +- its standard error"},
    {M, "attention_sink.head_mean", NULL, "first-token mass", "first-token mass", "%.4f", 0,
     "mean post-softmax probability on key 0 over queries 1..S-1, sequences and heads (the sink)"},
    {M, "variance_slope_attn", "variance_slope_attn_se", "var. slope attn", "var.\\ slope attn", "%.3f", 0,
     "log-log slope of the attention output's variance (before o_proj) against position, +- jackknife se "
     "(-1: variance like 1/position)"},
    {M, "variance_slope_resid", "variance_slope_resid_se", "var. slope resid", "var.\\ slope resid", "%.3f", 0,
     "log-log slope of the residual stream's variance after the layer against position, +- jackknife se"},
    {M, "position_probe.r2", "position_probe.r2_se", "position R2", "position $R^2$", "%.3f", 0,
     "held-out R2 of a ridge probe of the position from the residual stream after the layer, +- jackknife se "
     "(about 0: chance)"},
    {NR, "nri", NULL, "NRI no RoPE", "NRI no RoPE", "%.4f", 0, "the NRI of the --no-rope pass"},
    {NR, "residue_block_z", NULL, "block z no RoPE", "$z$ no RoPE", "%.2f", 0, "the block z of the --no-rope pass"},
    {BD, "nri", NULL, "NRI bidir.", "NRI bidir.", "%.4f", 0, "the NRI of the --bidirectional pass"},
    {BD, "residue_block_z", NULL, "block z bidir.", "$z$ bidir.", "%.2f", 0, "the block z of the --bidirectional pass"},
    {BD, "position_probe.r2", NULL, "position R2 bidir.", "position $R^2$ bidir.", "%.3f", 0,
     "the position probe's held-out R2 of the --bidirectional pass (a model without positional encoding: chance)"},
};
#undef M
#undef NR
#undef BD
const int mp_card_ncols = (int)(sizeof mp_card_cols / sizeof mp_card_cols[0]);

/* Model m's per-layer array key of pass p, or NULL. */
static const json_t *card_series(const json_t *model, int p, const char *key) {
    const json_t *pass = json_object_get(json_object_get(model, "passes"), mp_card_passes[p].name);
    return key ? json_object_get(json_object_get(pass, "per_layer"), key) : NULL;
}

const char *mp_card_cell(char *buf, size_t cap, const json_t *model, const MpCardCol *c, int l, int tex) {
    const char *none = tex ? "--" : "\xe2\x80\x93"; /* en dash */
    const json_t *v = json_array_get(card_series(model, c->pass, c->key), (size_t)l);
    const json_t *s = json_array_get(card_series(model, c->pass, c->se_key), (size_t)l);
    if (c->verdict && json_is_boolean(v)) snprintf(buf, cap, "%s", json_is_true(v) ? "resolved" : "not resolved");
    else if (!json_is_number(v) || c->verdict) snprintf(buf, cap, "%s", none);
    else {
        int w = snprintf(buf, cap, c->fmt, json_number_value(v));
        if (json_is_number(s) && w >= 0 && (size_t)w < cap) {
            w += snprintf(buf + w, cap - (size_t)w, "%s", tex ? " $\\pm$ " : " \xc2\xb1 ");
            if ((size_t)w < cap) snprintf(buf + w, cap - (size_t)w, c->fmt, json_number_value(s));
        }
    }
    return buf;
}

/* ================================================================ html */

static const char card_css[] =
    "body{font:14px/1.45 system-ui,sans-serif;max-width:1180px;margin:1.5em auto;padding:0 1em;color:#222}"
    "h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccc}"
    "table{border-collapse:collapse;font-variant-numeric:tabular-nums;margin:.5em 0}"
    "th,td{border:1px solid #ccc;padding:2px 7px;text-align:right}th{background:#f3f3f3}"
    "td.t,th.t{text-align:left}td.no{color:#b00}td.yes{color:#070}"
    "th.cf,td.cf{background:#f7f7ff}img{max-width:100%;border:1px solid #ddd}"
    "dl{display:grid;grid-template-columns:max-content auto;gap:.1em 1em}dt{font-weight:600}dd{margin:0}"
    ".small{font-size:.9em;color:#555}";

/* One entry of a <dl>: term and its description, escaped (NULL: empty). */
static void html_term(FILE *f, const char *term, const char *of) {
    fputs("<dt>", f);
    mp_html_text(f, term);
    fputs("</dt><dd>", f);
    mp_html_text(f, of ? of : "");
    fputs("</dd>\n", f);
}

/* The sequences whose residual stream the probe pass of model md read (variance's residual part,
 * the position probe: probe --resid-stride), as a cell; an en dash where neither was run. */
static void html_resid_cell(FILE *f, const json_t *md) {
    const json_t *p = json_object_get(json_object_get(md, "passes"), mp_card_passes[0].name);
    const json_int_t k = json_integer_value(json_object_get(p, "resid_stride"));
    const json_int_t n = json_integer_value(json_object_get(p, "resid_sequences"));
    if (k < 1) fputs("\xe2\x80\x93", f); /* en dash */
    else if (k == 1) fputs("every sequence", f);
    else fprintf(f, "1 in %lld (%lld sequences)", (long long)k, (long long)n);
}

/* The runs: one line each (model, family, sequences, length, layers, passes, residual stream read, folder). */
static void html_runs(FILE *f, const json_t *models) {
    fputs("<h2>Runs</h2>\n<table id=\"runs\"><thead><tr><th class=\"t\">model</th><th class=\"t\">family</th>"
          "<th>sequences N</th><th>length S</th><th>layers</th><th class=\"t\">passes</th>"
          "<th class=\"t\" title=\"the sequences whose residual stream the variance and position columns read "
          "(probe --resid-stride)\">residual stream read</th><th class=\"t\">folder</th></tr></thead><tbody>\n", f);
    size_t m;
    const json_t *md;
    json_array_foreach(models, m, md) {
        fputs("<tr><td class=\"t\">", f);
        mp_html_text(f, json_string_value(json_object_get(md, "name")));
        fputs("</td><td class=\"t\">", f);
        mp_html_text(f, json_string_value(json_object_get(md, "arch")));
        fprintf(f, "</td><td>%lld</td><td>%lld</td><td>%zu</td><td class=\"t\">",
                (long long)json_integer_value(json_object_get(md, "n")),
                (long long)json_integer_value(json_object_get(md, "seq")), json_array_size(json_object_get(md, "layers")));
        for (int p = 0, k = 0; p < MP_CARD_NPASS; p++)
            if (json_object_get(json_object_get(md, "passes"), mp_card_passes[p].name))
                fprintf(f, "%s%s", k++ ? ", " : "", mp_card_passes[p].name);
        fputs("</td><td class=\"t\">", f);
        html_resid_cell(f, md);
        fputs("</td><td class=\"t\">", f);
        mp_html_text(f, json_string_value(json_object_get(md, "folder")));
        fputs("</td></tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
}

/* The per-layer table: one row per layer of every model (a model column when there are several). */
static void html_table(FILE *f, const json_t *models) {
    const int many = json_array_size(models) > 1;
    fputs("<h2>Per layer</h2>\n<table id=\"per-layer\"><thead><tr>", f);
    if (many) fputs("<th class=\"t\">model</th>", f);
    fputs("<th>layer</th>", f);
    for (int c = 0; c < mp_card_ncols; c++) {
        fprintf(f, "<th%s title=\"", mp_card_cols[c].pass ? " class=\"cf\"" : "");
        mp_html_text(f, mp_card_cols[c].of);
        fputs("\">", f);
        mp_html_text(f, mp_card_cols[c].head);
        fputs("</th>", f);
    }
    fputs("</tr></thead><tbody>\n", f);
    size_t m, l;
    const json_t *md, *lj;
    char cell[128];
    json_array_foreach(models, m, md) {
        json_array_foreach(json_object_get(md, "layers"), l, lj) {
            fputs("<tr>", f);
            if (many) {
                fputs("<td class=\"t\">", f);
                mp_html_text(f, json_string_value(json_object_get(md, "name")));
                fputs("</td>", f);
            }
            fprintf(f, "<td>%lld</td>", (long long)json_integer_value(lj));
            for (int c = 0; c < mp_card_ncols; c++) {
                const MpCardCol *col = &mp_card_cols[c];
                mp_card_cell(cell, sizeof cell, md, col, (int)l, 0);
                const char *cls = col->pass ? "cf" : !col->verdict ? "" : !strcmp(cell, "resolved") ? "yes" : "no";
                fprintf(f, "<td%s%s%s>", cls[0] ? " class=\"" : "", cls, cls[0] ? "\"" : "");
                mp_html_text(f, cell);
                fputs("</td>", f);
            }
            fputs("</tr>\n", f);
        }
    }
    fputs("</tbody></table>\n<dl class=\"small\">\n", f);
    for (int c = 0; c < mp_card_ncols; c++) html_term(f, mp_card_cols[c].head, mp_card_cols[c].of);
    fputs("</dl>\n", f);
}

/* What each pass is, and which models have it. */
static void html_passes(FILE *f, const json_t *card) {
    fputs("<h2>Counterfactuals</h2>\n<p>Each column group comes from a separate probe pass over the same sequences "
          "with the same options; the counterfactual columns are shaded.</p>\n<dl>\n", f);
    for (int p = 0; p < MP_CARD_NPASS; p++) html_term(f, mp_card_passes[p].name, mp_card_passes[p].of);
    fputs("</dl>\n", f);
    const char *note = json_string_value(json_object_get(card, "passes_note"));
    if (note) {
        fputs("<p class=\"small\">", f);
        mp_html_text(f, note);
        fputs("</p>\n", f);
    }
}

/* The maps: each model's figure, embedded. */
static int html_maps(FILE *f, const json_t *models, const char *const *figs, MpErr *e) {
    size_t m;
    const json_t *md;
    int any = 0;
    json_array_foreach(models, m, md) any |= figs && figs[m];
    if (!any) return MP_OK;
    fputs("<h2>Mean maps</h2>\n<p class=\"small\">Per layer, the mean pre-softmax score map of the probe pass, "
          "diagonal-normalised (the residue: vlag centred on 0, limits +-max(|1st|, |99th| percentile)); a layer whose "
          "residue is not resolved is washed out and framed in red.</p>\n", f);
    json_array_foreach(models, m, md) {
        if (!figs[m]) continue;
        fputs("<figure><img alt=\"mean maps of ", f);
        mp_html_text(f, json_string_value(json_object_get(md, "name")));
        fputs("\" src=\"data:image/png;base64,", f);
        if (mp_html_base64_file(f, figs[m], e) != MP_OK) return MP_ERR;
        fputs("\"><figcaption>", f);
        mp_html_text(f, json_string_value(json_object_get(md, "name")));
        fputs("</figcaption></figure>\n", f);
    }
    return MP_OK;
}

/* 1 when key is the number or the standard error of a column of the per-layer table (pass p). */
static int card_key_shown(int p, const char *key) {
    for (int c = 0; c < mp_card_ncols; c++)
        if (mp_card_cols[c].pass == p &&
            (!strcmp(mp_card_cols[c].key, key) || (mp_card_cols[c].se_key && !strcmp(mp_card_cols[c].se_key, key))))
            return 1;
    return 0;
}

/* Every other per-layer number of each model's probe pass (one row per key, one column per layer):
 * whatever statistics the runs hold, including rows added to the probe later. */
static void html_others(FILE *f, const json_t *models) {
    fputs("<h2>Every other per-layer number</h2>\n<p class=\"small\">The probe pass's meta.json, per layer "
          "(docs/metrics.md; the key names are meta.json's; .head_mean: the mean over heads).</p>\n", f);
    size_t m, l;
    const json_t *md, *lj;
    json_array_foreach(models, m, md) {
        const json_t *pl = json_object_get(json_object_get(json_object_get(md, "passes"), mp_card_passes[0].name), "per_layer");
        fprintf(f, "<table class=\"others\" id=\"others-%zu\"><thead><tr><th class=\"t\">", m + 1);
        mp_html_text(f, json_string_value(json_object_get(md, "name")));
        fputs("</th>", f);
        json_array_foreach(json_object_get(md, "layers"), l, lj) fprintf(f, "<th>layer %lld</th>", (long long)json_integer_value(lj));
        fputs("</tr></thead><tbody>\n", f);
        const char *key;
        const json_t *arr;
        json_object_foreach((json_t *)pl, key, arr) {
            if (card_key_shown(MP_CARD_PASS_MAIN, key)) continue;
            fputs("<tr><td class=\"t\">", f);
            mp_html_text(f, key);
            fputs("</td>", f);
            json_array_foreach(arr, l, lj) {
                if (json_is_number(lj)) fprintf(f, "<td>%.6g</td>", json_number_value(lj));
                else if (json_is_boolean(lj)) fprintf(f, "<td>%s</td>", json_is_true(lj) ? "true" : "false");
                else fputs("<td>\xe2\x80\x93</td>", f);
            }
            fputs("</tr>\n", f);
        }
        fputs("</tbody></table>\n", f);
    }
}

/* The files of every pass of every model, as their meta.json describes them. */
static void html_files(FILE *f, const json_t *models) {
    fputs("<h2>Files</h2>\n", f);
    size_t m;
    const json_t *md;
    json_array_foreach(models, m, md) {
        for (int p = 0; p < MP_CARD_NPASS; p++) {
            const json_t *pass = json_object_get(json_object_get(md, "passes"), mp_card_passes[p].name);
            if (!pass) continue;
            fputs("<details><summary>", f);
            mp_html_text(f, json_string_value(json_object_get(md, "name")));
            fputs(", ", f);
            mp_html_text(f, mp_card_passes[p].name);
            fputs(": ", f);
            mp_html_text(f, json_string_value(json_object_get(pass, "folder")));
            fputs("</summary><dl class=\"small\">\n", f);
            const char *k;
            const json_t *v;
            json_object_foreach((json_t *)json_object_get(pass, "files"), k, v) html_term(f, k, json_string_value(v));
            fputs("</dl></details>\n", f);
        }
    }
}

int mp_card_write_html(const char *path, const json_t *card, const char *const *figs, MpErr *e) {
    const json_t *models = json_object_get(card, "models");
    MpAtomicFile af;
    if (mp_atomic_open(&af, path, e) != MP_OK) return MP_ERR;
    FILE *f = af.f;
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>maskpos card: ", f);
    size_t m;
    const json_t *md;
    json_array_foreach(models, m, md) {
        if (m) fputs(", ", f);
        mp_html_text(f, json_string_value(json_object_get(md, "name")));
    }
    fprintf(f, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>maskpos card</h1>\n<p>", card_css);
    mp_html_text(f, json_string_value(json_object_get(card, "card_of")));
    fputs("</p>\n", f);
    html_runs(f, models);
    html_table(f, models);
    html_passes(f, card);
    int rc = html_maps(f, models, figs, e);
    if (rc == MP_OK) {
        html_others(f, models);
        html_files(f, models);
        fputs("<p class=\"small\">Written by maskpos ", f);
        mp_html_text(f, json_string_value(json_object_get(card, "maskpos_version")));
        fputs("; the numbers are in card.json, the table also in card.md and card.tex.</p>\n</body>\n</html>\n", f);
    }
    if (rc != MP_OK) {
        mp_atomic_abort(&af);
        return MP_ERR;
    }
    return mp_atomic_commit(&af, e);
}

/* ================================================================ text */

/* s with LaTeX's special characters escaped. */
static void tex_text(FILE *f, const char *s) {
    for (; s && *s; s++) {
        if (strchr("&%$#_{}", *s)) fprintf(f, "\\%c", *s);
        else if (*s == '~') fputs("\\textasciitilde{}", f);
        else if (*s == '^') fputs("\\textasciicircum{}", f);
        else if (*s == '\\') fputs("\\textbackslash{}", f);
        else fputc(*s, f);
    }
}

/* s as the text of a Markdown table cell: '|' and '\\' escaped, a line break a space (NULL: nothing). */
static void md_text(FILE *f, const char *s) {
    for (; s && *s; s++) {
        if (*s == '|' || *s == '\\') fputc('\\', f);
        fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    }
}

/* The table as Markdown (tex 0) or LaTeX (tex 1). */
static int card_write_text(const char *path, const json_t *card, int tex, MpErr *e) {
    const json_t *models = json_object_get(card, "models");
    const int many = json_array_size(models) > 1;
    MpAtomicFile af;
    if (mp_atomic_open(&af, path, e) != MP_OK) return MP_ERR;
    FILE *f = af.f;
    if (tex) {
        fputs("% maskpos card: the per-layer table (docs/card.md); counterfactual columns from separate passes\n"
              "\\begin{tabular}{", f);
        fprintf(f, "%s", many ? "lr" : "r");
        for (int c = 0; c < mp_card_ncols; c++) fputc(mp_card_cols[c].verdict ? 'l' : 'r', f);
        fputs("}\n\\hline\n", f);
        fputs(many ? "model & layer" : "layer", f);
        for (int c = 0; c < mp_card_ncols; c++) fprintf(f, " & %s", mp_card_cols[c].tex);
        fputs(" \\\\\n\\hline\n", f);
    } else {
        fputs(many ? "| model | layer |" : "| layer |", f);
        for (int c = 0; c < mp_card_ncols; c++) fprintf(f, " %s |", mp_card_cols[c].head);
        fputs(many ? "\n|:--|--:|" : "\n|--:|", f);
        for (int c = 0; c < mp_card_ncols; c++) fputs(mp_card_cols[c].verdict ? ":--|" : "--:|", f);
        fputc('\n', f);
    }
    size_t m, l;
    const json_t *md, *lj;
    char cell[128];
    json_array_foreach(models, m, md) {
        json_array_foreach(json_object_get(md, "layers"), l, lj) {
            if (many && tex) tex_text(f, json_string_value(json_object_get(md, "name")));
            else if (many) {
                fputs("| ", f);
                md_text(f, json_string_value(json_object_get(md, "name")));
                fputc(' ', f);
            }
            fprintf(f, tex ? "%s%lld" : "| %s%lld |", many && tex ? " & " : "", (long long)json_integer_value(lj));
            for (int c = 0; c < mp_card_ncols; c++)
                fprintf(f, tex ? " & %s" : " %s |", mp_card_cell(cell, sizeof cell, md, &mp_card_cols[c], (int)l, tex));
            fputs(tex ? " \\\\\n" : "\n", f);
        }
    }
    if (tex) fputs("\\hline\n\\end{tabular}\n", f);
    return mp_atomic_commit(&af, e);
}

int mp_card_write_md(const char *path, const json_t *card, MpErr *e) { return card_write_text(path, card, 0, e); }
int mp_card_write_tex(const char *path, const json_t *card, MpErr *e) { return card_write_text(path, card, 1, e); }
