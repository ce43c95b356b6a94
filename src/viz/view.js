// view.js — the maskpos map viewer (src/viz/view.c embeds this file in every page it writes).
//
// Reads each viewer's JSON header (<script id="ID-meta">) and the runs' base64 blobs
// (<script id="ID-rK">), decodes maps on demand and draws them on canvases: layer / head / view
// selectors, the figures' colour maps and limits, hover read-out, drag-zoom, row and column
// profiles, runs side by side with shared limits and their difference. No network, no library.
// Storage (docs/view.md): per map either float16 · 2^k or 8-bit codes (lo + code · sc, 255 = not
// observed); scores and per-head maps hold the residue R = S − diagonal mean, and the diagonal
// means in float64 (index i − j + n − 1). Tested by tests/browser/check_view.js.
"use strict";
(function () {
  // ---------------------------------------------------------------- decoding
  const F16 = new Float64Array(65536);
  for (let h = 0; h < 65536; h++) {
    const e = (h >> 10) & 31, m = h & 1023;
    let v = e === 0 ? m * Math.pow(2, -24) : e === 31 ? (m ? NaN : Infinity) : (1 + m / 1024) * Math.pow(2, e - 15);
    F16[h] = h & 0x8000 ? -v : v;
  }

  function blobBytes(id) {
    const el = document.getElementById(id);
    if (!el) throw new Error("viewer data " + id + " is missing");
    const bin = atob(el.textContent.trim());
    const u = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) u[i] = bin.charCodeAt(i);
    return u.buffer;
  }

  // One stored map → {n, v: values (n*n, NaN = not observed), dm: diagonal means or null}.
  // For kinds stored as residues, v is the raw value R + dm[i − j + n − 1].
  function decodeMap(buf, kind, rec) {
    const n = kind.n, tri = kind.tri, v = new Float64Array(n * n).fill(NaN);
    const cnt = tri ? (n * (n + 1)) / 2 : n * n;
    let get;
    if (kind.enc === "f16") {
      const q = new Uint16Array(buf, rec.o, cnt), s = Math.pow(2, rec.k);
      get = (w) => F16[q[w]] * s;
    } else {
      const q = new Uint8Array(buf, rec.o, cnt);
      get = (w) => (q[w] === 255 ? NaN : rec.lo + q[w] * rec.sc);
    }
    const dm = kind.resid ? new Float64Array(buf, rec.d, 2 * n - 1) : null;
    let w = 0;
    for (let i = 0; i < n; i++)
      for (let j = 0; j < (tri ? i + 1 : n); j++) v[i * n + j] = get(w++) + (dm ? dm[i - j + n - 1] : 0);
    return { n: n, v: v, dm: dm, res: dm ? null : v };
  }

  // Absolute storage error bound of a value read from this kind (docs/view.md).
  function storageBound(kind, rec, resid) {
    if (kind.enc === "f16") return Math.abs(resid) * Math.pow(2, -11) + Math.pow(2, rec.k - 25);
    return rec.sc / 2;
  }

  // ---------------------------------------------------------------- colours and limits
  function cmapEval(cm, t, reversed) {
    if (!(t > 0)) t = 0;
    if (t > 1) t = 1;
    if (reversed) t = 1 - t;
    const a = cm.rgb, n = a.length / 3, x = t * (n - 1);
    let k = Math.floor(x);
    if (k >= n - 1) k = n - 2;
    const f = x - k, out = [0, 0, 0];
    for (let c = 0; c < 3; c++) out[c] = Math.round((1 - f) * a[3 * k + c] + f * a[3 * k + 3 + c]);
    return out;
  }

  // numpy's default (linear) percentile of sorted values.
  function percentile(sorted, p) {
    const n = sorted.length;
    if (n === 0) return NaN;
    const x = (p / 100) * (n - 1), k = Math.floor(x);
    return k + 1 < n ? sorted[k] + (x - k) * (sorted[k + 1] - sorted[k]) : sorted[n - 1];
  }

  function finiteSorted(maps) {
    let cnt = 0;
    for (const m of maps) for (let a = 0; a < m.length; a++) if (Number.isFinite(m[a])) cnt++;
    const s = new Float64Array(cnt);
    let w = 0;
    for (const m of maps) for (let a = 0; a < m.length; a++) if (Number.isFinite(m[a])) s[w++] = m[a];
    return s.sort();
  }

  function fmt(x) {
    if (!Number.isFinite(x)) return String(x);
    if (x === 0) return "0";
    const a = Math.abs(x);
    return a >= 1e-4 && a < 1e6 ? String(Number(x.toPrecision(7))) : x.toExponential(6);
  }
  function short(x) {
    return Number.isFinite(x) ? String(Number(x.toPrecision(4))) : "–";
  }
  function esc(s) {
    return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  }
  // The box of a line chart at (x, y), w × h, its y range lo..hi at the left, x from 0 to xEnd below.
  function lineFrame(ctx, x, y, w, h, lo, hi, xEnd) {
    ctx.strokeStyle = "#999";
    ctx.strokeRect(x, y, w, h);
    ctx.fillStyle = "#444";
    ctx.font = "10px sans-serif";
    ctx.fillText(short(hi), 2, y + 6);
    ctx.fillText(short(lo), 2, y + h);
    ctx.fillText("0", x, y + h + 12);
    ctx.fillText(xEnd, x + w - 24, y + h + 12);
  }
  function el(tag, cls, parent, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  const VIEWS = [
    { id: "raw", name: "raw scores", cmap: "rocket" },
    { id: "diag", name: "diagonal-mean normalised (residue)", cmap: "vlag" },
    { id: "se", name: "standard error", cmap: "rocket" },
    { id: "z", name: "z = residue / standard error", cmap: "vlag" },
    { id: "probs", name: "attention probabilities", cmap: "rocket" },
  ];
  const LINE_COLOURS = ["#1f5fa8", "#c0392b", "#2e8b57", "#8e44ad", "#d68910", "#555", "#16a085", "#7f8c8d"];
  const PROFILE_W = 420, PROFILE_H = 150;

  // ---------------------------------------------------------------- one viewer
  function Viewer(root) {
    this.root = root;
    this.id = root.id;
    this.meta = JSON.parse(document.getElementById(this.id + "-meta").textContent);
    this.runs = this.meta.runs;
    this.bufs = this.runs.map(() => null);
    this.cache = new Map();
    this.limCache = new Map();
    // the page opens on the residue (what the figures show), raw scores for Gram matrices
    const residue = this.runs.every((r) => !r.layer_names);
    this.st = { layer: 0, head: -1, view: residue ? "diag" : "raw", cmap: "", lim: "clip", vmin: NaN, vmax: NaN, diff: false,
      a: 0, b: 1, zoom: { x: 0, y: 0, s: 1 }, hover: null, drag: null };
    this.maxL = Math.max.apply(null, this.runs.map((r) => r.L));
    this.maxH = Math.max.apply(null, this.runs.map((r) => r.H));
    this.build();
    this.render();
  }

  Viewer.prototype.buf = function (r) {
    if (!this.bufs[r]) this.bufs[r] = blobBytes(this.id + "-r" + r);
    return this.bufs[r];
  };

  // The decoded map of run r for kind name and index (cached).
  Viewer.prototype.map = function (r, name, idx) {
    const kind = this.runs[r].arrays[name];
    if (!kind || idx >= kind.maps.length) return null;
    const key = r + ":" + name + ":" + idx;
    let m = this.cache.get(key);
    if (!m) {
      if (this.cache.size > 64) this.cache.clear();
      m = decodeMap(this.buf(r), kind, kind.maps[idx]);
      m.kind = kind;
      m.rec = kind.maps[idx];
      this.cache.set(key, m);
    }
    return m;
  };

  // What run r shows in the current state: {n, v (values), base (raw map with dm), se map, kind}.
  Viewer.prototype.current = function (r) {
    const run = this.runs[r], st = this.st;
    if (st.layer >= run.L) return { missing: "no layer " + (st.layer + 1) };
    const head = st.head >= 0 && run.H > 0 ? st.head : -1;
    if (st.head >= 0 && run.H === 0) return { missing: "this run kept no heads" };
    if (head >= run.H) return { missing: "no head " + (head + 1) };
    const key = "cur:" + r + ":" + st.layer + ":" + head + ":" + st.view;
    let c = this.cache.get(key);
    if (c) return c;
    const base = head >= 0 ? this.map(r, "heads", st.layer * run.H + head) : this.map(r, "scores", st.layer);
    const se = head >= 0 ? this.map(r, "heads_se", st.layer * run.H + head) : this.map(r, "se", st.layer);
    let v;
    if (st.view === "raw") v = base.v;
    else if (st.view === "diag" || st.view === "z") {
      if (st.view === "z" && !se) return { missing: head >= 0 ? "this run has no scores_heads_se.npy" : "this run has no scores_se.npy" };
      const n = base.n;
      v = new Float64Array(n * n);
      for (let i = 0; i < n; i++)
        for (let j = 0; j < n; j++) {
          const a = i * n + j, res = base.v[a] - base.dm[i - j + n - 1];
          v[a] = st.view === "z" ? res / se.v[a] : res;
        }
    } else if (st.view === "se") {
      if (!se) return { missing: head >= 0 ? "this run has no scores_heads_se.npy" : "this run has no scores_se.npy" };
      v = se.v;
    } else {
      const p = head >= 0 ? null : this.map(r, "probs", st.layer);
      if (!p) return { missing: head >= 0 ? "no probabilities per head" : "this run has no probs.npy" };
      v = p.v;
    }
    const src = st.view === "se" ? se : st.view === "probs" ? this.map(r, "probs", st.layer) : base;
    c = { n: base.n, v: v, base: base, se: se, src: src, f: base.kind.f, S: run.S, head: head };
    this.cache.set(key, c);
    return c;
  };

  // ---------------------------------------------------------------- controls and layout
  Viewer.prototype.build = function () {
    const root = this.root, st = this.st, self = this;
    root.textContent = "";
    if (this.meta.title) el("h2", "", root, this.meta.title);
    const ctl = el("div", "mpv-controls", root);
    const sel = (label, cls, opts, onchange) => {
      const lab = el("label", "", ctl, label + " ");
      const s = el("select", cls, lab);
      for (const o of opts) {
        const op = el("option", "", s, o[1]);
        op.value = o[0];
        if (o[2]) op.disabled = true;
      }
      s.addEventListener("change", () => { onchange(s.value); self.render(); });
      return s;
    };
    const r0 = this.runs[0];
    const layerName = (l) => (r0.layer_names && l < r0.layer_names.length ? r0.layer_names[l]
      : "layer " + (r0.layers && l < r0.layers.length ? r0.layers[l] : l + 1));
    const layers = [];
    for (let l = 0; l < this.maxL; l++) layers.push([l, layerName(l)]);
    this.layerSel = sel("Layer", "mpv-layer", layers, (v) => { st.layer = +v; });
    if (this.maxH > 0) {
      const heads = [[-1, "mean over heads"]];
      for (let h = 0; h < this.maxH; h++) heads.push([h, "head " + (h + 1)]); // heads 1-based, as layers (docs/outputs.md)
      this.headSel = sel("Head", "mpv-head", heads, (v) => { st.head = +v; });
    }
    const has = (name) => this.runs.some((r) => r.arrays[name]);
    const views = VIEWS.map((v) => [v.id, v.name, (v.id === "se" || v.id === "z") && !has("se") || v.id === "probs" && !has("probs")]);
    this.viewSel = sel("View", "mpv-view", views, (v) => { st.view = v; st.cmap = ""; });
    this.viewSel.value = st.view;
    this.cmapSel = sel("Colours", "mpv-cmap", [["", "figure default"]].concat(Object.keys(this.meta.cmaps).map((k) => [k, k])),
      (v) => { st.cmap = v; });
    this.limSel = sel("Limits", "mpv-lim", [["clip", "1–99 % of entries"], ["minmax", "min–max"], ["manual", "manual"]],
      (v) => { st.lim = v; });
    const num = (label, key) => {
      const lab = el("label", "", ctl, label + " ");
      const i = el("input", "mpv-" + key, lab);
      i.type = "number";
      i.step = "any";
      i.addEventListener("change", () => { st[key] = parseFloat(i.value); st.lim = "manual"; self.limSel.value = "manual"; self.render(); });
      return i;
    };
    this.vminIn = num("min", "vmin");
    this.vmaxIn = num("max", "vmax");
    if (this.runs.length > 1) {
      const lab = el("label", "", ctl);
      const cb = el("input", "mpv-diff", lab);
      cb.type = "checkbox";
      lab.appendChild(document.createTextNode(" difference "));
      const runOpts = this.runs.map((r, k) => [k, r.label]);
      const sa = el("select", "mpv-diff-a", lab), sb = el("select", "mpv-diff-b", lab);
      for (const [s, d] of [[sa, 0], [sb, 1]]) {
        for (const o of runOpts) el("option", "", s, o[1]).value = o[0];
        s.value = d;
      }
      lab.insertBefore(document.createTextNode(" − "), sb);
      cb.addEventListener("change", () => { st.diff = cb.checked; self.render(); });
      sa.addEventListener("change", () => { st.a = +sa.value; self.render(); });
      sb.addEventListener("change", () => { st.b = +sb.value; self.render(); });
    }
    const reset = el("button", "mpv-reset", ctl, "reset zoom");
    reset.addEventListener("click", () => { st.zoom = { x: 0, y: 0, s: 1 }; self.render(); });
    this.panelsDiv = el("div", "mpv-panels", root);
    this.info = el("div", "mpv-info", root, "Hover over a map to read its entries; drag to zoom in, double-click to zoom out.");
    const prof = el("div", "mpv-profiles", root);
    this.profiles = ["row", "col"].map((w) => {
      const fig = el("figure", "", prof);
      const cap = el("figcaption", "", fig, w === "row" ? "row profile (query i fixed, over keys j)" : "column profile (key j fixed, over queries i)");
      const c = el("canvas", "mpv-profile-" + w, fig);
      c.width = PROFILE_W;
      c.height = PROFILE_H;
      return { canvas: c, cap: cap, which: w };
    });
    const legend = el("div", "mpv-legend", root, "profiles: ");
    this.runs.forEach((r, k) => { el("span", "", legend, "— " + r.label + "  ").style.color = LINE_COLOURS[k % LINE_COLOURS.length]; });
    if (this.runs.length > 1) el("span", "", legend, "— difference");
    this.statsDiv = el("div", "mpv-stats", root);
    const notes = el("ul", "mpv-notes", root);
    for (const r of this.runs) {
      el("li", "", notes, r.note + (r.text_note ? "; " + r.text_note : "") + (r.tokens ? "; text of sequence 1 shown on hover" : ""));
      if (r.info) el("li", "", notes, r.label + ": " + Object.keys(r.info).map((k) => k + " " + r.info[k]).join(", "));
    }
    el("li", "", notes, "Storage: float16 maps are within 2^-11 of each value (residues: of the residue); 8-bit maps within half a step (shown on hover).");
  };

  // Panels: one per run, then the difference when asked for.
  Viewer.prototype.panelList = function () {
    const st = this.st, list = this.runs.map((r, k) => ({ run: k, title: r.label }));
    if (st.diff && this.runs.length > 1 && st.a !== st.b)
      list.push({ run: -1, title: "difference: " + this.runs[st.a].label + " − " + this.runs[st.b].label });
    return list;
  };

  Viewer.prototype.diffMap = function () {
    const A = this.current(this.st.a), B = this.current(this.st.b);
    if (A.missing || B.missing) return { missing: A.missing || B.missing };
    if (A.n !== B.n || A.S !== B.S) return { missing: "the two runs have different shapes (S " + A.S + " vs " + B.S + ")" };
    const v = new Float64Array(A.n * A.n);
    for (let a = 0; a < v.length; a++) v[a] = A.v[a] - B.v[a];
    return { n: A.n, v: v, f: A.f, S: A.S, diffOf: [A, B] };
  };

  Viewer.prototype.cmapFor = function (isDiff) {
    const st = this.st, name = isDiff ? "vlag" : st.cmap || VIEWS.find((v) => v.id === st.view).cmap;
    return { name: name, cm: this.meta.cmaps[name] };
  };

  // Colour limits of the run panels (shared) or of the difference panel.
  Viewer.prototype.limits = function (maps, cmap, key) {
    const st = this.st;
    if (st.lim === "manual" && Number.isFinite(st.vmin) && Number.isFinite(st.vmax) && st.vmin < st.vmax && key !== "diff")
      return [st.vmin, st.vmax];
    const ck = key + ":" + st.lim + ":" + cmap.name;
    let lim = this.limCache.get(ck);
    if (!lim) {
      const s = finiteSorted(maps);
      lim = st.lim === "minmax" || st.lim === "manual" ? [s[0], s[s.length - 1]] : [percentile(s, 1), percentile(s, 99)];
      if (cmap.cm.diverging) {
        const m = Math.max(Math.abs(lim[0]), Math.abs(lim[1]));
        lim = [-m, m];
      }
      if (!(lim[0] < lim[1])) {
        const d = Number.isFinite(lim[0]) && lim[0] !== 0 ? Math.abs(lim[0]) * 0.1 : 1;
        lim = [(lim[0] || 0) - d, (lim[1] || 0) + d];
      }
      if (this.limCache.size > 200) this.limCache.clear();
      this.limCache.set(ck, lim);
    }
    return lim;
  };

  Viewer.prototype.stateKey = function () {
    const st = this.st;
    return st.layer + ":" + st.head + ":" + st.view;
  };

  // ---------------------------------------------------------------- drawing
  Viewer.prototype.render = function () {
    const st = this.st, list = this.panelList();
    const cur = list.map((p) => (p.run >= 0 ? this.current(p.run) : this.diffMap()));
    const runMaps = cur.filter((c, k) => list[k].run >= 0 && !c.missing).map((c) => c.v);
    const cm = this.cmapFor(false), cmd = this.cmapFor(true);
    const lim = runMaps.length ? this.limits(runMaps, cm, "runs:" + this.stateKey()) : [0, 1];
    if (st.lim !== "manual") {
      this.vminIn.value = short(lim[0]);
      this.vmaxIn.value = short(lim[1]);
    }
    const size = Math.max(240, Math.min(480, Math.floor((this.root.clientWidth || 1000) / Math.min(list.length, 3)) - 90));
    this.panelsDiv.textContent = "";
    this.panels = [];
    list.forEach((p, k) => {
      const c = cur[k], isDiff = p.run < 0;
      // is this layer's residue resolved at this N: the figures' note, red and hatched when not
      const sg = p.run >= 0 && this.runs[p.run].signif ? this.runs[p.run].signif[st.layer] : null;
      const pl = this.makePanel(p.title, c, size, sg);
      pl.hatch = !!(sg && sg.unresolved && (st.view === "diag" || st.view === "z"));
      if (!c.missing) {
        const lk = isDiff ? this.limits([c.v], cmd, "diff:" + st.a + ":" + st.b + ":" + this.stateKey()) : lim;
        pl.lim = lk;
        pl.cm = isDiff ? cmd : cm;
        this.drawMap(pl, c);
      }
      pl.cur = c;
      pl.run = p.run;
      this.panels.push(pl);
    });
    this.showHover();
    this.renderStats();
  };

  // ---------------------------------------------------------------- the statistics beside the maps
  // (probe --stats variance, position, freq: the run's small arrays in its header, "stats")
  const POS = { r2: 0, mae: 1, maeSe: 2, r2Chance: 3, maeChance: 4, r2Se: 10 }; // pos_probe.npy's columns (docs/outputs.md)
  const STAT_W = 460, STAT_H = 220;

  // The selected layer as the first run numbers it ("layer 3").
  Viewer.prototype.layerWord = function (l) {
    const r0 = this.runs[0];
    return "layer " + (r0.layers && l < r0.layers.length ? r0.layers[l] : l + 1);
  };

  Viewer.prototype.renderStats = function () {
    const div = this.statsDiv, l = this.st.layer;
    div.textContent = "";
    const withs = (k) => this.runs.map((r, i) => [r, i]).filter(([r]) => r.stats && r.stats[k]);
    const pos = withs("pos_probe"), vr = withs("var_attn"), fq = withs("freq_q_norm");
    if (!pos.length && !vr.length && !fq.length) return;
    el("h3", "", div, "Statistics beside the maps");
    if (pos.length) this.posTable(el("div", "mpv-stat-pos", div), pos);
    if (vr.length) this.varChart(el("div", "mpv-stat-var", div), vr, l);
    if (fq.length) this.freqMaps(el("div", "mpv-stat-freq", div), fq, l);
  };

  // The position probe: a row per run and layer, held-out R² ± se against chance, MAE ± se against chance.
  Viewer.prototype.posTable = function (div, runs) {
    el("div", "mpv-stat-title", div, "Position probe (ridge from the residual stream after the layer; held out 1 sequence in 4)");
    const t = el("table", "mpv-pos", div), head = el("tr", "", t);
    for (const h of ["run", "layer", "R² held out", "± se", "chance R²", "MAE (positions)", "± se", "chance MAE"]) el("th", "", head, h);
    for (const [r, i] of runs) {
      const p = r.stats.pos_probe, Q = r.stats.pos_probe_shape[1];
      for (let l = 0; l < r.L; l++) {
        const tr = el("tr", "", t), at = (c) => p[l * Q + c];
        el("td", "", tr, r.label);
        el("td", "", tr, String(r.layers ? r.layers[l] : l + 1));
        const cells = [["r2", POS.r2], ["r2se", POS.r2Se], ["r2chance", POS.r2Chance], ["mae", POS.mae], ["maese", POS.maeSe],
          ["maechance", POS.maeChance]];
        for (const [k, c] of cells) {
          const td = el("td", "mpv-pos-" + k, tr, short(at(c) === null ? NaN : at(c)));
          td.dataset.run = i;
          td.dataset.layer = l;
        }
      }
    }
  };

  // Variance against position, log-log, at the selected layer: attention output (solid) and residual
  // stream (dashed) of every run, the slopes of meta.json in the caption.
  Viewer.prototype.varChart = function (div, runs, l) {
    el("div", "mpv-stat-title", div, "Variance by position, " + this.layerWord(l) + " (log2 variance against log2(position + 1); " +
      "solid: attention output before o_proj, dashed: residual stream after the layer)");
    const c = el("canvas", "mpv-var", div);
    c.width = STAT_W;
    c.height = STAT_H;
    const ctx = c.getContext("2d"), pad = 40, series = [];
    let x1 = 1, y0 = Infinity, y1 = -Infinity;
    for (const [r, i] of runs) {
      if (l >= r.L) continue;
      for (const [key, dash] of [["var_attn", false], ["var_resid", true]]) {
        const v = r.stats[key];
        if (!v) continue;
        const pts = [];
        for (let p = 1; p < r.S; p++) {
          const y = v[l * r.S + p];
          if (y === null || !(y > 0)) continue;
          pts.push([Math.log2(p + 1), Math.log2(y)]);
          y0 = Math.min(y0, Math.log2(y));
          y1 = Math.max(y1, Math.log2(y));
          x1 = Math.max(x1, Math.log2(p + 1));
        }
        series.push({ pts: pts, dash: dash, colour: LINE_COLOURS[i % LINE_COLOURS.length] });
      }
    }
    if (!series.length || !(y0 <= y1)) return;
    if (y0 === y1) { y0 -= 1; y1 += 1; }
    const X = (x) => pad + ((STAT_W - pad - 8) * x) / x1, Y = (y) => STAT_H - 20 - ((STAT_H - 30) * (y - y0)) / (y1 - y0);
    lineFrame(ctx, pad, 10, STAT_W - pad - 8, STAT_H - 30, y0, y1, short(x1));
    for (const s of series) {
      ctx.strokeStyle = s.colour;
      ctx.setLineDash(s.dash ? [5, 3] : []);
      ctx.beginPath();
      s.pts.forEach((q, k) => (k ? ctx.lineTo(X(q[0]), Y(q[1])) : ctx.moveTo(X(q[0]), Y(q[1]))));
      ctx.stroke();
    }
    ctx.setLineDash([]);
    const cap = el("div", "mpv-var-slopes", div);
    for (const [r, i] of runs) {
      const s = r.stats, sl = (k) => (s[k] && l < s[k].length && s[k][l] !== null ? short(s[k][l]) : "–");
      const line = el("span", "", cap, r.label + ": slope attention " + sl("variance_slope_attn") + " ± " + sl("variance_slope_attn_se") +
        ", residual " + sl("variance_slope_resid") + " ± " + sl("variance_slope_resid_se") +
        (s.resid_sequences !== undefined ? " (residual stream of " + s.resid_sequences + " sequences)" : "") + "  ");
      line.style.color = LINE_COLOURS[i % LINE_COLOURS.length];
    }
  };

  // RoPE frequency usage at the selected layer: head × frequency pair, the query norm and the pair's
  // mean |contribution|, in the figures' "rocket" colours, each map scaled to its own maximum.
  Viewer.prototype.freqMaps = function (div, runs, l) {
    el("div", "mpv-stat-title", div, "RoPE frequency usage, " + this.layerWord(l) + " (rows: heads, columns: frequency pairs, " +
      "pair 0 the highest frequency; each map from 0 to its maximum)");
    const cm = this.meta.cmaps.rocket;
    for (const [r] of runs) {
      if (l >= r.L) continue;
      for (const key of ["freq_q_norm", "freq_contrib"]) {
        const v = r.stats[key];
        if (!v) continue;
        const sh = r.stats[key + "_shape"], H = sh[1], P = sh[2], off = l * H * P, px = Math.max(2, Math.floor(360 / P));
        let hi = 0;
        for (let k = 0; k < H * P; k++) if (v[off + k] !== null) hi = Math.max(hi, v[off + k]);
        const fig = el("figure", "mpv-freq-fig", div);
        el("figcaption", "", fig, r.label + ": " + (key === "freq_q_norm" ? "query norm" : "mean |contribution|") + " (max " + short(hi) + ")");
        const c = el("canvas", "mpv-freq", fig);
        c.width = P * px;
        c.height = H * Math.max(2, Math.min(12, Math.floor(240 / H)));
        const ctx = c.getContext("2d"), ph = c.height / H;
        for (let h = 0; h < H; h++)
          for (let p = 0; p < P; p++) {
            const x = v[off + h * P + p];
            if (x === null) continue;
            const rgb = cmapEval(cm, hi > 0 ? x / hi : 0, false);
            ctx.fillStyle = "rgb(" + rgb[0] + "," + rgb[1] + "," + rgb[2] + ")";
            ctx.fillRect(p * px, h * ph, px, Math.ceil(ph));
          }
      }
    }
  };

  Viewer.prototype.makePanel = function (title, c, size, sg) {
    const div = el("div", "mpv-panel", this.panelsDiv);
    const td = el("div", "mpv-title", div, title);
    if (sg && sg.text) el("div", "mpv-signif" + (sg.unresolved ? " mpv-unresolved" : ""), td, sg.text);
    if (c.missing) {
      el("div", "mpv-missing", div, title + ": " + c.missing);
      return { div: div };
    }
    const yl = el("div", "mpv-ylab", div, "query i");
    const stack = el("div", "mpv-stack", div);
    const cv = el("canvas", "mpv-map", stack), ov = el("canvas", "mpv-overlay", stack);
    cv.width = cv.height = ov.width = ov.height = size;
    const bar = el("div", "mpv-bar", div);
    const hi = el("span", "mpv-hi", bar), bc = el("canvas", "mpv-cbar", bar), lo = el("span", "mpv-lo", bar);
    bc.width = 14;
    bc.height = size - 40;
    const xl = el("div", "mpv-xlab", div);
    const x0 = el("span", "", xl), xm = el("span", "", xl, "key j"), x1 = el("span", "", xl);
    const pl = { div: div, canvas: cv, overlay: ov, bar: bc, hi: hi, lo: lo, x0: x0, x1: x1, ylab: yl, size: size };
    void xm;
    this.attach(pl);
    return pl;
  };

  // Visible cell range of a map of side n under the zoom: rows/cols [a, b).
  Viewer.prototype.range = function (n) {
    const z = this.st.zoom;
    const a0 = Math.max(0, Math.floor(z.y * n)), a1 = Math.min(n, Math.max(a0 + 1, Math.ceil((z.y + z.s) * n)));
    const b0 = Math.max(0, Math.floor(z.x * n)), b1 = Math.min(n, Math.max(b0 + 1, Math.ceil((z.x + z.s) * n)));
    return { r0: a0, r1: a1, c0: b0, c1: b1 };
  };

  Viewer.prototype.drawMap = function (pl, c) {
    const P = pl.size, n = c.n, g = this.range(n), ctx = pl.canvas.getContext("2d");
    const img = ctx.createImageData(P, P), px = img.data;
    const rows = g.r1 - g.r0, cols = g.c1 - g.c0, lim = pl.lim, span = lim[1] - lim[0];
    const lut = [];
    for (let k = 0; k < 256; k++) lut.push(cmapEval(pl.cm.cm, k / 255, false));
    const colour = (val, o) => {
      if (!Number.isFinite(val)) {
        px[o] = px[o + 1] = px[o + 2] = 255;
        px[o + 3] = 255;
        return;
      }
      const t = (val - lim[0]) / span, q = lut[Math.max(0, Math.min(255, Math.round(t * 255)))];
      px[o] = q[0];
      px[o + 1] = q[1];
      px[o + 2] = q[2];
      px[o + 3] = 255;
    };
    // each pixel: the mean of the finite cells under it (area averaging), or the one cell it shows
    for (let y = 0; y < P; y++) {
      const i0 = g.r0 + Math.floor((y * rows) / P), i1 = Math.max(i0 + 1, g.r0 + Math.floor(((y + 1) * rows) / P));
      for (let x = 0; x < P; x++) {
        const j0 = g.c0 + Math.floor((x * cols) / P), j1 = Math.max(j0 + 1, g.c0 + Math.floor(((x + 1) * cols) / P));
        let s = 0, w = 0;
        for (let i = i0; i < i1; i++)
          for (let j = j0; j < j1; j++) {
            const val = c.v[i * n + j];
            if (Number.isFinite(val)) { s += val; w++; }
          }
        colour(w > 0 && w * 4 >= (i1 - i0) * (j1 - j0) ? s / w : NaN, 4 * (y * P + x));
      }
    }
    ctx.putImageData(img, 0, 0);
    if (pl.hatch) { // the residue is not resolved at this N: noise, marked so it is not read as pattern
      ctx.save();
      ctx.strokeStyle = "rgba(90, 90, 90, 0.55)";
      ctx.lineWidth = 1;
      ctx.beginPath();
      for (let d = -P; d < P; d += Math.max(8, P / 16)) {
        ctx.moveTo(d, P);
        ctx.lineTo(d + P, 0);
      }
      ctx.stroke();
      ctx.restore();
    }
    const bctx = pl.bar.getContext("2d"), H = pl.bar.height;
    for (let y = 0; y < H; y++) {
      const q = cmapEval(pl.cm.cm, 1 - y / (H - 1), false);
      bctx.fillStyle = "rgb(" + q.join(",") + ")";
      bctx.fillRect(0, y, pl.bar.width, 1);
    }
    pl.hi.textContent = short(lim[1]);
    pl.lo.textContent = short(lim[0]);
    pl.x0.textContent = String(posRange(g.c0, c.f, c.S)[0]);
    pl.x1.textContent = String(posRange(g.c1 - 1, c.f, c.S)[1]);
    pl.ylab.textContent = "query i (" + posRange(g.r0, c.f, c.S)[0] + " at the top, " + posRange(g.r1 - 1, c.f, c.S)[1] + " at the bottom)";
    pl.range = g;
  };

  // ---------------------------------------------------------------- mouse: hover, zoom
  Viewer.prototype.cellAt = function (pl, ev) {
    const rect = pl.canvas.getBoundingClientRect(), n = pl.cur.n, g = pl.range;
    const fx = (ev.clientX - rect.left - pl.canvas.clientLeft) / pl.size, fy = (ev.clientY - rect.top - pl.canvas.clientTop) / pl.size;
    if (!(fx >= 0 && fx < 1 && fy >= 0 && fy < 1)) return null;
    const u = Math.min(n - 1, g.r0 + Math.floor(fy * (g.r1 - g.r0))), v = Math.min(n - 1, g.c0 + Math.floor(fx * (g.c1 - g.c0)));
    const z = this.st.zoom;
    return { u: u, v: v, fx: z.x + fx * z.s, fy: z.y + fy * z.s, px: fx * pl.size, py: fy * pl.size };
  };

  Viewer.prototype.attach = function (pl) {
    const self = this, st = this.st;
    pl.canvas.addEventListener("mousemove", (ev) => {
      const c = self.cellAt(pl, ev);
      if (!c) return;
      if (st.drag) {
        const o = pl.overlay.getContext("2d");
        o.clearRect(0, 0, pl.size, pl.size);
        o.strokeStyle = "#000";
        o.setLineDash([4, 3]);
        o.strokeRect(st.drag.px, st.drag.py, c.px - st.drag.px, c.py - st.drag.py);
      }
      st.hover = { u: c.u, v: c.v, n: pl.cur.n };
      self.showHover();
    });
    pl.canvas.addEventListener("mousedown", (ev) => {
      const c = self.cellAt(pl, ev);
      if (c) st.drag = c;
      ev.preventDefault();
    });
    pl.canvas.addEventListener("mouseup", (ev) => {
      const c = self.cellAt(pl, ev), d = st.drag;
      st.drag = null;
      pl.overlay.getContext("2d").clearRect(0, 0, pl.size, pl.size);
      if (!c || !d || Math.abs(c.px - d.px) + Math.abs(c.py - d.py) < 6) return;
      const x0 = Math.min(c.fx, d.fx), y0 = Math.min(c.fy, d.fy);
      const s = Math.max(Math.abs(c.fx - d.fx), Math.abs(c.fy - d.fy), 2 / pl.cur.n);
      st.zoom = { x: Math.max(0, Math.min(1 - s, x0)), y: Math.max(0, Math.min(1 - s, y0)), s: Math.min(1, s) };
      self.render();
    });
    pl.canvas.addEventListener("mouseleave", () => {
      st.drag = null;
      pl.overlay.getContext("2d").clearRect(0, 0, pl.size, pl.size);
    });
    pl.canvas.addEventListener("dblclick", () => {
      st.zoom = { x: 0, y: 0, s: 1 };
      self.render();
    });
  };

  // Position range [a, b] of stored cell u of a map averaged over f x f blocks of S positions.
  function posRange(u, f, S) {
    return [u * f, Math.min(S, (u + 1) * f) - 1];
  }
  function posText(u, f, S) {
    const r = posRange(u, f, S);
    return r[0] === r[1] ? String(r[0]) : r[0] + "–" + r[1];
  }

  Viewer.prototype.showHover = function () {
    const h = this.st.hover;
    if (!h) return;
    const parts = [], st = this.st;
    for (const pl of this.panels) {
      const c = pl.cur;
      if (!c || c.missing || c.n !== h.n) continue;
      const a = h.u * c.n + h.v, val = c.v[a];
      const title = pl.run >= 0 ? this.runs[pl.run].label : "difference";
      let line = "<b>" + esc(title) + "</b>: query i = <span class=\"mpv-i\">" + posText(h.u, c.f, c.S) +
        "</span>, key j = <span class=\"mpv-j\">" + posText(h.v, c.f, c.S) + "</span>" +
        (c.f > 1 ? " (mean of a " + c.f + "×" + c.f + " block)" : "") + ": " +
        "<span class=\"mpv-val\" data-run=\"" + pl.run + "\"";
      if (pl.run >= 0 && Number.isFinite(val)) {
        const src = c.src, resid = c.base.dm ? c.base.v[a] - c.base.dm[h.u - h.v + c.n - 1] : val;
        let tol = NaN;
        if (st.view === "raw" || st.view === "diag") tol = storageBound(c.base.kind, c.base.rec, resid);
        else if (st.view === "se" || st.view === "probs") tol = storageBound(src.kind, src.rec, val);
        line += " data-tol=\"" + (Number.isFinite(tol) ? tol : "") + "\"";
      }
      line += ">" + fmt(val) + "</span>";
      if (pl.run >= 0 && c.se && (st.view === "raw" || st.view === "diag") && Number.isFinite(c.se.v[a]))
        line += " ± <span class=\"mpv-se\">" + fmt(c.se.v[a]) + "</span> (standard error)";
      if (pl.run >= 0 && c.base.dm) {
        const d = h.u - h.v;
        line += "; diagonal i − j = " + (c.f > 1 ? d + " (stored cells)" : d) + ": mean <span class=\"mpv-dm\">" +
          fmt(c.base.dm[d + c.n - 1]) + "</span>";
      }
      const run = pl.run >= 0 ? this.runs[pl.run] : null;
      if (run && run.tokens && c.n === c.S) {
        line += "; sequence 1: query token <code>" + esc(JSON.stringify(run.tokens[h.u])) + "</code>, key token <code>" +
          esc(JSON.stringify(run.tokens[h.v])) + "</code>";
      }
      parts.push(line);
    }
    this.info.innerHTML = parts.join("<br>");
    this.drawProfiles(h);
  };

  // ---------------------------------------------------------------- profiles
  Viewer.prototype.drawProfiles = function (h) {
    for (const pr of this.profiles) {
      const ctx = pr.canvas.getContext("2d"), W = PROFILE_W, H = PROFILE_H, pad = 34;
      ctx.clearRect(0, 0, W, H);
      const series = [];
      let lo = Infinity, hi = -Infinity, len = 0;
      this.panels.forEach((pl, k) => {
        const c = pl.cur;
        if (!c || c.missing || c.n !== h.n) return;
        const ys = new Float64Array(c.n);
        for (let t = 0; t < c.n; t++) {
          ys[t] = pr.which === "row" ? c.v[h.u * c.n + t] : c.v[t * c.n + h.v];
          if (Number.isFinite(ys[t])) { lo = Math.min(lo, ys[t]); hi = Math.max(hi, ys[t]); }
        }
        len = c.n;
        series.push({ ys: ys, colour: pl.run >= 0 ? LINE_COLOURS[pl.run % LINE_COLOURS.length] : "#000" });
        void k;
      });
      if (!series.length || !(lo <= hi)) continue;
      if (lo === hi) { lo -= 1; hi += 1; }
      const X = (t) => pad + ((W - pad - 6) * t) / Math.max(1, len - 1), Y = (y) => H - 16 - ((H - 24) * (y - lo)) / (hi - lo);
      lineFrame(ctx, pad, 8, W - pad - 6, H - 24, lo, hi, String(len - 1));
      const at = pr.which === "row" ? h.v : h.u;
      ctx.strokeStyle = "#bbb";
      ctx.beginPath();
      ctx.moveTo(X(at), 8);
      ctx.lineTo(X(at), H - 16);
      ctx.stroke();
      for (const s of series) {
        ctx.strokeStyle = s.colour;
        ctx.beginPath();
        let pen = false;
        for (let t = 0; t < len; t++) {
          if (!Number.isFinite(s.ys[t])) { pen = false; continue; }
          if (pen) ctx.lineTo(X(t), Y(s.ys[t]));
          else ctx.moveTo(X(t), Y(s.ys[t]));
          pen = true;
        }
        ctx.stroke();
      }
      const n0 = this.panels.find((pl) => pl.cur && !pl.cur.missing);
      const S = n0 ? n0.cur.S : len;
      const f = n0 ? n0.cur.f : 1;
      pr.cap.textContent = pr.which === "row" ? "row profile: query i = " + posText(h.u, f, S) + ", over keys j"
        : "column profile: key j = " + posText(h.v, f, S) + ", over queries i";
    }
  };

  // ---------------------------------------------------------------- start
  function start(root) {
    if (root.dataset.mpvStarted) return;
    root.dataset.mpvStarted = "1";
    try {
      const t0 = performance.now();
      const v = new Viewer(root);
      root.dataset.mpvReady = String(Math.round(performance.now() - t0));
      (window.mpvViewers = window.mpvViewers || {})[root.id] = v;
    } catch (err) {
      root.textContent = "";
      el("p", "mpv-error", root, "viewer: " + err.message);
      throw err;
    }
  }

  function startAll() {
    for (const root of document.querySelectorAll("div.mpv")) {
      const det = root.closest("details");
      if (det && !det.open) det.addEventListener("toggle", () => { if (det.open) start(root); });
      else start(root);
    }
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", startAll);
  else startAll();
})();
