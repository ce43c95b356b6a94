// check_hostile.js — test-only: opens a page written by `maskpos view` from a run whose folder
// name, meta.json strings, --title and token text are script injections (each sets
// window.__pwned or opens a dialog when it runs), hovers the map's cells (the hover shows the
// label and the tokens), and checks that none ran: no dialog, window.__pwned unset, no element
// the strings would create (img, svg, iframe, script beyond the page's own), no page error, and
// the hostile text shown as text where the page shows it.
// usage: node check_hostile.js PAGE.html MARKER
//   MARKER: a substring of the hostile strings that must appear in the page's visible text
// Prints one line per check and a closing PASS/FAIL line; exit 0 when every check holds.
"use strict";
const path = require("path");
const { chromium } = require("playwright-core");

(async () => {
  const [pageFile, marker] = process.argv.slice(2);
  if (!pageFile || !marker) {
    console.log("usage: node check_hostile.js PAGE.html MARKER");
    process.exit(2);
  }
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const fails = [];
  const check = (ok, what) => { console.log((ok ? "ok   " : "FAIL ") + what); if (!ok) fails.push(what); };
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1100 } });
    const errors = [];
    let dialogs = 0;
    page.on("dialog", async (d) => { dialogs++; await d.dismiss(); });
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto("file://" + path.resolve(pageFile), { waitUntil: "load", timeout: 60000 });
    await page.waitForSelector("canvas.mpv-map", { timeout: 60000 });
    const box = await page.$eval("canvas.mpv-map", (c) => { c.scrollIntoView({ block: "center" }); const r = c.getBoundingClientRect(); return [r.left, r.top, r.width]; });
    let sawTokens = false;
    for (let k = 1; k < 10; k++) { // cells on and below the diagonal: the hover shows label and tokens
      await page.mouse.move(box[0] + box[2] * (k / 10 - 0.03), box[1] + box[2] * (k / 10 + 0.02));
      const t = await page.$eval(".mpv-info", (e) => e.textContent);
      if (t.includes("query token")) sawTokens = true;
    }
    await page.waitForTimeout(300);
    const st = await page.evaluate(() => ({
      pwned: window.__pwned, scripts: document.querySelectorAll("script:not([type])").length,
      foreign: document.querySelectorAll("img, svg, iframe, object, embed, [onerror], [onload]").length,
      text: document.body.innerText + " " + document.title,
    }));
    check(dialogs === 0, `${dialogs} dialog(s) opened`);
    check(st.pwned === undefined, `window.__pwned is ${st.pwned}`);
    check(st.foreign === 0, `${st.foreign} element(s) the hostile strings would create`);
    check(st.scripts === 1, `${st.scripts} script element(s) of code (the page has one)`);
    check(errors.length === 0, `page errors: ${errors.length ? errors.join(" | ") : "none"}`);
    check(st.text.includes(marker), `the hostile text is shown as text ("${marker}")`);
    check(sawTokens, "the hover showed the tokens of sequence 1");
  } catch (e) {
    check(false, "exception: " + e);
  } finally {
    await browser.close();
  }
  console.log(fails.length ? `FAIL (${fails.length})` : "PASS");
  process.exit(fails.length ? 1 : 0);
})();
