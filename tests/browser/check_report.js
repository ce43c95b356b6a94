// check_report.js — test-only: opens a maskpos report.html in Debian's headless Chromium (through
// playwright-core) and checks that the page loads, has its verdict table, and that every image it
// references exists and decodes (complete, with a non-zero natural size).
// usage: node check_report.js REPORT.html EXPECTED_IMAGES
// Prints one line; exit 0 when every check holds, 1 otherwise.
"use strict";
const path = require("path");
const { chromium } = require("playwright-core");

async function main() {
  const [file, want] = process.argv.slice(2);
  if (!file || !want) {
    console.log("usage: node check_report.js REPORT.html EXPECTED_IMAGES");
    return 2;
  }
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  try {
    const page = await browser.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    const resp = await page.goto("file://" + path.resolve(file), { waitUntil: "load", timeout: 30000 });
    const r = await page.evaluate(() => {
      const imgs = Array.from(document.images);
      return {
        images: imgs.length,
        decoded: imgs.filter((i) => i.complete && i.naturalWidth > 0 && i.naturalHeight > 0).length,
        rows: document.querySelectorAll("table tr").length,
        title: document.title,
      };
    });
    const ok = resp !== null && errors.length === 0 && r.images === Number(want) && r.decoded === r.images && r.rows > 1;
    console.log(`${ok ? "PASS" : "FAIL"}: ${r.images} images (${r.decoded} decoded, want ${want}), ` +
                `${r.rows} table rows, title "${r.title}", ${errors.length} page errors`);
    return ok ? 0 : 1;
  } finally {
    await browser.close();
  }
}

main().then((c) => process.exit(c), (e) => { console.log("FAIL: " + e.message.split("\n")[0]); process.exit(1); });
