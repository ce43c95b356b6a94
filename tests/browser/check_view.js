// check_view.js — test-only: opens a page written by `maskpos view` in Debian's headless Chromium
// (through playwright-core), switches layer, head and view, hovers cells and compares the value
// the page shows with the .npy entry read here (an independent reader; diagonal means computed
// here from scores.npy), within the storage precision of docs/view.md: float16 maps hold the
// residue R = S − diagonal mean, so |shown − npy| ≤ 2^-11·|R| (+ display rounding, 1e-6 relative);
// 8-bit maps are within the half step the page states, which must be ≤ 1/200 of the map's range.
// Also: drag-zoom changes the axis, the difference panel appears, profiles are drawn, no console
// or page errors. When DIR holds probe --stats position / variance / freq arrays: the position
// table's R², its se and the MAE of each layer equal pos_probe.npy's (4 significant digits, as
// shown; --wrong: against the next layer's), the variance chart and the frequency maps are drawn.
// usage: node check_view.js PAGE.html DIR [DIR2] [--shot FILE.png] [--wrong] [--bytes-text FILE] [--id ID]
//   --id: the viewer element to check (default mpv0, the page of `maskpos view`); in a report,
//     every folded viewer is opened and must draw, then viewer ID (DIR: its first run) is checked;
//   --bytes-text: the run is `probe --data FILE --pack` of a byte model with BOS: the hover must
//     name the tokens of sequence 1, position p ≥ 1 being byte p − 1 of FILE;
//   --wrong: compare against the neighbouring cell (j+1) instead: the check must then FAIL.
// Prints one line per check and a closing PASS/FAIL line; exit 0 when every check holds.
"use strict";
const fs = require("fs");
const path = require("path");
const { chromium } = require("playwright-core");

// ---------------------------------------------------------------- .npy reader (float32/64, C order)
function readNpy(file) {
  const b = fs.readFileSync(file);
  if (b.toString("latin1", 0, 6) !== "\x93NUMPY") throw new Error(file + ": not a .npy file");
  const major = b[6], hl = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8), h0 = major === 1 ? 10 : 12;
  const hdr = b.toString("latin1", h0, h0 + hl);
  const descr = /'descr':\s*'([^']+)'/.exec(hdr)[1], shape = /'shape':\s*\(([^)]*)\)/.exec(hdr)[1];
  if (/True/.test(/'fortran_order':\s*(\w+)/.exec(hdr)[1])) throw new Error(file + ": Fortran order");
  const dims = shape.split(",").map((s) => s.trim()).filter((s) => s).map(Number);
  const data = b.subarray(h0 + hl), n = dims.reduce((a, c) => a * c, 1);
  const out = new Float64Array(n);
  if (descr === "<f8") for (let k = 0; k < n; k++) out[k] = data.readDoubleLE(8 * k);
  else if (descr === "<f4") for (let k = 0; k < n; k++) out[k] = data.readFloatLE(4 * k);
  else throw new Error(file + ": dtype " + descr);
  return { shape: dims, v: out };
}

// The map the page stores for map (S,S) at offset off of a stack: means of the observed entries
// of f x f blocks (f = 1: the map itself), blank (NaN) when less than a quarter is observed.
function avgMap(a, off, S, f) {
  const n = Math.ceil(S / f), v = new Float64Array(n * n);
  for (let u = 0; u < n; u++) for (let w = 0; w < n; w++) {
    const i1 = Math.min(S, (u + 1) * f), j1 = Math.min(S, (w + 1) * f);
    let s = 0, c = 0;
    for (let i = u * f; i < i1; i++) for (let j = w * f; j < j1; j++) {
      const x = a.v[off + i * S + j];
      if (Number.isFinite(x)) { s += x; c++; }
    }
    v[u * n + w] = c > 0 && 4 * c >= (i1 - u * f) * (j1 - w * f) ? s / c : NaN;
  }
  return { n: n, v: v };
}
// Diagonal means of a map (n,n): dm[i − j + n − 1] over finite entries.
function diagMeans(m) {
  const n = m.n, s = new Float64Array(2 * n - 1), w = new Float64Array(2 * n - 1);
  for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) {
    const x = m.v[i * n + j];
    if (Number.isFinite(x)) { s[i - j + n - 1] += x; w[i - j + n - 1]++; }
  }
  return s.map((x, d) => (w[d] ? x / w[d] : NaN));
}
function rangeOf(a, off, S) {
  let lo = Infinity, hi = -Infinity;
  for (let k = 0; k < S * S; k++) { const x = a.v[off + k]; if (Number.isFinite(x)) { lo = Math.min(lo, x); hi = Math.max(hi, x); } }
  return hi - lo;
}
function parseRange(t) {
  const m = /^(\d+)(?:–(\d+))?$/.exec(t.trim());
  if (!m) throw new Error("cannot read position '" + t + "'");
  return [Number(m[1]), Number(m[2] === undefined ? m[1] : m[2])];
}

async function main() {
  const args = process.argv.slice(2);
  const shotAt = args.indexOf("--shot");
  const shot = shotAt >= 0 ? args.splice(shotAt, 2)[1] : null;
  const wrongAt = args.indexOf("--wrong");
  const wrong = wrongAt >= 0 ? (args.splice(wrongAt, 1), 1) : 0;
  const idAt = args.indexOf("--id");
  const id = idAt >= 0 ? args.splice(idAt, 2)[1] : "mpv0", V = "#" + id;
  const textAt = args.indexOf("--bytes-text");
  const text = textAt >= 0 ? fs.readFileSync(args.splice(textAt, 2)[1]) : null;
  const [page_file, dir, dir2] = args;
  if (!page_file || !dir) {
    console.log("usage: node check_view.js PAGE.html DIR [DIR2] [--shot FILE.png] [--wrong]");
    return 2;
  }
  const opt = (f) => (fs.existsSync(path.join(dir, f)) ? readNpy(path.join(dir, f)) : null);
  const scores = opt("scores.npy"), se = opt("scores_se.npy"), probs = opt("probs.npy"), heads = opt("scores_heads.npy"),
    headsSe = opt("scores_heads_se.npy");
  const L = scores.shape[0], S = scores.shape[1], H = heads ? heads.shape[1] : 0;
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const fails = [];
  let nchecks = 0;
  const check = (ok, what) => { nchecks++; console.log((ok ? "ok   " : "FAIL ") + what); if (!ok) fails.push(what); };
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1100 } });
    const errors = [], requests = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
    page.on("request", (r) => { if (!r.url().startsWith("file:") && !r.url().startsWith("data:")) requests.push(r.url()); });
    const t0 = Date.now();
    await page.goto("file://" + path.resolve(page_file), { waitUntil: "load", timeout: 60000 });
    // viewers folded under a report's figures start when opened: open them all
    const folded = await page.$$eval("details.mpv-details", (ds) => { ds.forEach((d) => { d.open = true; }); return ds.length; });
    if (folded) {
      await page.waitForFunction((n) => Object.keys(window.mpvViewers || {}).length === n, folded, { timeout: 60000 });
      const started = await page.$$eval("details.mpv-details", (ds) => ds.filter((d) => d.querySelector("canvas.mpv-map")).length);
      check(started === folded, `${started} of ${folded} viewers in the page drawn`);
    }
    await page.waitForSelector(`${V} canvas.mpv-map`, { timeout: 60000 });
    const openMs = Date.now() - t0;
    const nruns = await page.evaluate((id) => window.mpvViewers[id].runs.length, id);
    check((await page.$$(`${V} canvas.mpv-map`)).length === nruns && nruns >= (dir2 ? 2 : 1), `${nruns} map panel(s) drawn`);

    // hover the stored cell holding position (i, j) of run 0; returns what the page shows
    const hover = async (i, j) => {
      const box = await page.$eval(`${V} canvas.mpv-map`, (c) => { c.scrollIntoView({ block: "center" }); const r = c.getBoundingClientRect(); return [r.left + c.clientLeft, r.top + c.clientTop, c.width]; });
      const n = await page.evaluate((id) => window.mpvViewers[id].panels[0].cur.n, id);
      const g = await page.evaluate((id) => window.mpvViewers[id].panels[0].range, id);
      const u = Math.floor((i * n) / S), v = Math.floor((j * n) / S);
      const x = box[0] + ((v - g.c0 + 0.5) * box[2]) / (g.c1 - g.c0), y = box[1] + ((u - g.r0 + 0.5) * box[2]) / (g.r1 - g.r0);
      await page.mouse.move(x, y);
      return page.evaluate((sel) => {
        const q = (s) => document.querySelector(sel + " .mpv-info " + s);
        const v = q('.mpv-val[data-run="0"]');
        return { i: q(".mpv-i") && q(".mpv-i").textContent, j: q(".mpv-j") && q(".mpv-j").textContent,
                 val: v ? Number(v.textContent) : NaN, tol: v ? Number(v.dataset.tol) : NaN, text: v ? document.querySelector(sel + " .mpv-info").textContent : "" };
      }, V);
    };
    const select = async (cls, value) => { await page.selectOption(`${V} select.` + cls, String(value)); };

    // expected value at the hovered cell, from the map the page claims to store (docs/view.md):
    // "raw" = block mean, "resid" = block mean − its diagonal's mean, "plain" = block mean; the
    // float16 bound is 2^-11 of the stored residue ("raw", "resid") or of the value ("plain")
    const expect = async (what, arr, off, i, j, kind, f16) => {
      const got = await hover(i, j);
      const [ia, ib] = parseRange(got.i), [ja, jb] = parseRange(got.j);
      const fm = /mean of a (\d+)×/.exec(got.text), f = fm ? Number(fm[1]) : 1;
      const m = avgMap(arr, off, S, f), dm = diagMeans(m), u = ia / f, v = ja / f + wrong;
      const raw = m.v[u * m.n + v], res = raw - dm[u - v + m.n - 1];
      const want = kind === "resid" ? res : raw, stored = kind === "plain" ? raw : res;
      let tol;
      if (f16) tol = Math.abs(stored) * Math.pow(2, -11) * 1.001 + Math.abs(want) * 1e-6 + 1e-12;
      else {
        tol = got.tol * 1.001 + Math.abs(want) * 1e-6;
        check(got.tol <= rangeOf(arr, off, S) / 200, `${what}: 8-bit half step ${got.tol} ≤ range/200`);
      }
      // the pointer lands on the cell holding (i, j), or next to it when cells are under a pixel wide
      const slack = 2 * f * Math.max(1, Math.ceil(S / (await page.evaluate((id) => window.mpvViewers[id].panels[0].size, id))));
      const okPos = Number.isInteger(u) && ib - ia + 1 <= f && Math.abs(ia - i) <= slack && Math.abs(ja - j) <= slack;
      check(okPos && Math.abs(got.val - want) <= tol,
            `${what}: i=${got.i} j=${got.j} shows ${got.val}, .npy ${want} (|Δ| ${Math.abs(got.val - want).toExponential(2)} ≤ ${tol.toExponential(2)})`);
      return got;
    };

    // the colour bar's ends are the first and last anchors of viz/cmap.c (hard-coded here)
    const barEnds = () => page.$eval(`${V} canvas.mpv-cbar`, (c) => {
      const x = c.getContext("2d"), top = x.getImageData(7, 0, 1, 1).data, bot = x.getImageData(7, c.height - 1, 1, 1).data;
      return [Array.from(top.slice(0, 3)), Array.from(bot.slice(0, 3))];
    });
    const near = (a, b) => a.every((x, k) => Math.abs(x - b[k]) <= 1);
    // the page opens on the residue (vlag), as the figures show it; then the raw scores (rocket)
    let ends = await barEnds();
    const opened = await page.$eval(`${V} select.mpv-view`, (s) => s.value);
    const gram = await page.evaluate((id) => window.mpvViewers[id].runs.some((r) => r.layer_names), id);
    check(opened === (gram ? "raw" : "diag"), `the page opens on the ${opened} view (${gram ? "Gram matrices: raw" : "the residue"})`);
    if (!gram) check(near(ends[0], [0xa9, 0x37, 0x3b]) && near(ends[1], [0x23, 0x69, 0xbd]), `opened on the residue: vlag colour bar ends ${JSON.stringify(ends)}`);
    await select("mpv-view", "raw");
    ends = await barEnds();
    check(near(ends[0], [0xfa, 0xeb, 0xdd]) && near(ends[1], [0x03, 0x05, 0x1a]), `raw view: rocket colour bar ends ${JSON.stringify(ends)}`);
    // each layer's significance under the panel's title, where the run's meta.json has it
    const signif = await page.evaluate((id) => window.mpvViewers[id].runs.map((r) => r.signif ? r.signif.length : 0), id);
    if (signif[0]) {
      const txt = await page.$eval(`${V} .mpv-signif`, (d) => d.textContent + "|" + d.className);
      check(/(block z|rms\/noise) .*(resolved|too few)/.test(txt), `significance under the title: ${txt}`);
    }

    const l = L - 1, i = Math.floor(0.8 * S), j = Math.floor(0.3 * S), off = l * S * S;
    await select("mpv-layer", l);
    // float16, or 8 bits (report.html's compact viewers): as the page says it stores each kind
    const encF16 = (n) => page.evaluate(([id, n]) => { const k = window.mpvViewers[id].runs[0].arrays[n]; return !k || k.enc === "f16"; }, [id, n]);
    const sF16 = await encF16("scores"), seF16 = await encF16("se"), pF16 = await encF16("probs");
    const first = await expect(`layer ${l + 1} raw`, scores, off, i, j, "raw", sF16);
    if (text) {
      const got = await hover(i, j);
      const q = "query token " + JSON.stringify(text.toString("latin1", i - 1, i)), k = "key token " + JSON.stringify(text.toString("latin1", j - 1, j));
      check(got.text.includes(q) && got.text.includes(k),
            `text of sequence 1 at i=${i}, j=${j}: ${JSON.stringify(got.text.slice(got.text.indexOf("sequence 1")))}`);
    }
    await select("mpv-view", "diag");
    ends = await barEnds();
    check(near(ends[0], [0xa9, 0x37, 0x3b]) && near(ends[1], [0x23, 0x69, 0xbd]), `residue view: vlag colour bar ends ${JSON.stringify(ends)}`);
    await expect(`layer ${l + 1} diagonal-normalised`, scores, off, i, j, "resid", sF16);
    const diagnorm = opt("scores_diagnorm.npy");
    if (diagnorm && !/mean of a/.test(first.text)) await expect(`layer ${l + 1} diagonal-normalised vs scores_diagnorm.npy`, diagnorm, off, i, j, "plain", sF16);
    if (se) {
      await select("mpv-view", "se");
      await expect(`layer ${l + 1} standard error`, se, off, i, j, "plain", seF16);
    }
    if (probs) {
      await select("mpv-view", "probs");
      await expect(`layer ${l + 1} probabilities`, probs, off, i, j, "plain", pF16);
    }
    if (H > 0) {
      await select("mpv-view", "raw");
      await select("mpv-layer", 0);
      await select("mpv-head", H - 1);
      const hoff = (0 * H + (H - 1)) * S * S;
      const f16 = await page.evaluate((id) => window.mpvViewers[id].runs[0].arrays.heads.enc === "f16", id);
      const got = await expect(`layer 1 head ${H} raw`, heads, hoff, i, j, "raw", f16);
      check(/mean of a/.test(got.text) === !/^\d+$/.test(got.i), "block note shown exactly when the map is area-averaged");
      const headLabel = await page.$eval(`${V} select.mpv-head`, (s) => s.options[s.selectedIndex].textContent);
      check(headLabel === `head ${H}`, `the last head is labelled '${headLabel}' (heads 1-based, docs/outputs.md)`);
      if (headsSe) {
        const pm = /± ([^ ]+) \(standard error\)/.exec(got.text);
        check(pm !== null, `layer 1 head ${H} hover shows ± (its standard error)`);
        await select("mpv-view", "se");
        await expect(`layer 1 head ${H} standard error`, headsSe, hoff, i, j, "plain", f16);
        await select("mpv-view", "raw");
      }
      await select("mpv-head", -1);
      await select("mpv-layer", l);
    }
    // drag-zoom: from 10 % to 40 % of the map; the key axis must then start near 10 %
    await select("mpv-view", "raw");
    const box = await page.$eval(`${V} canvas.mpv-map`, (c) => { c.scrollIntoView({ block: "center" }); const r = c.getBoundingClientRect(); return [r.left + c.clientLeft, r.top + c.clientTop, c.width]; });
    await page.mouse.move(box[0] + 0.1 * box[2], box[1] + 0.6 * box[2]);
    await page.mouse.down();
    await page.mouse.move(box[0] + 0.3 * box[2], box[1] + 0.8 * box[2], { steps: 5 });
    await page.mouse.move(box[0] + 0.4 * box[2], box[1] + 0.9 * box[2], { steps: 5 });
    await page.mouse.up();
    const x0 = Number(await page.$eval(`${V} .mpv-xlab span`, (s) => s.textContent));
    check(Math.abs(x0 - 0.1 * S) <= 0.02 * S + 2, `drag-zoom: key axis starts at ${x0} (want ≈ ${0.1 * S})`);
    await expect(`zoomed layer ${l + 1} raw`, scores, off, Math.floor(0.75 * S), Math.floor(0.2 * S), "raw", sF16);
    const inked = await page.$eval(`${V} canvas.mpv-profile-row`, (c) => {
      const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      let k = 0;
      for (let a = 3; a < d.length; a += 4) k += d[a] > 0;
      return k;
    });
    check(inked > 200, `row profile drawn (${inked} pixels)`);
    if (dir2) {
      await page.check(`${V} input.mpv-diff`);
      check((await page.$$(`${V} canvas.mpv-map`)).length === nruns + 1, "difference panel beside the runs");
      const both = await page.$$eval(`${V} .mpv-info .mpv-val`, (v) => v.map((e) => e.textContent));
      check(both.length >= 2, `hover shows ${both.length} values (each run and the difference)`);
    }
    const pp = opt("pos_probe.npy");
    if (pp) { // the position probe's table: run 0's rows
      const Q = pp.shape[1], rows = await page.$$eval(`${V} td[data-run="0"]`, (tds) => tds.map((t) => [t.className, +t.dataset.layer, t.textContent]));
      const col = { "mpv-pos-r2": 0, "mpv-pos-r2se": 10, "mpv-pos-mae": 1 };
      let worst = 0, seen = 0;
      for (const [cls, l, txt] of rows) {
        if (!(cls in col)) continue;
        const want = pp.v[((l + wrong) % L) * Q + col[cls]], got = Number(txt);
        worst = Math.max(worst, Math.abs(got - want) / Math.max(Math.abs(want), 1e-12));
        seen++;
      }
      check(seen === 3 * L && worst <= 5e-4, `position table: ${seen} cells (R², se, MAE of ${L} layers) within ${worst.toExponential(2)} relative of pos_probe.npy`);
    }
    const inkedOf = (sel) => page.$$eval(sel, (cs) => cs.map((c) => {
      const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      let k = 0;
      for (let a = 3; a < d.length; a += 4) k += d[a] > 0;
      return k;
    }));
    if (opt("var_attn.npy")) {
      const ink = await inkedOf(`${V} canvas.mpv-var`);
      check(ink.length === 1 && ink[0] > 300, `variance chart drawn (${ink[0]} pixels)`);
    }
    if (opt("freq_q_norm.npy")) {
      const ink = await inkedOf(`${V} canvas.mpv-freq`);
      check(ink.length >= 2 && ink.every((k) => k > 50), `frequency maps drawn (${ink.length}: ${ink.join(", ")} pixels)`);
    }
    if (shot) {
      await page.mouse.move(box[0] + 0.55 * box[2], box[1] + 0.7 * box[2]);
      await page.screenshot({ path: shot, fullPage: true });
    }
    const ready = await page.$eval(V, (d) => d.dataset.mpvReady);
    check(errors.length === 0, `no console or page errors${errors.length ? ": " + errors[0] : ""}`);
    check(requests.length === 0, `no network requests${requests.length ? ": " + requests[0] : ""}`);
    console.log(`open: ${openMs} ms to the first map (viewer start ${ready} ms); page ${(fs.statSync(page_file).size / 1048576).toFixed(1)} MiB`);
  } finally {
    await browser.close();
  }
  const ok = fails.length === 0 && nchecks > 5;
  console.log(`${ok ? "PASS" : "FAIL"}: ${nchecks - fails.length} of ${nchecks} checks hold`);
  return ok ? 0 : 1;
}

main().then((c) => process.exit(c), (e) => { console.log("FAIL: " + e.message.split("\n")[0]); process.exit(1); });
