#!/usr/bin/env node
// bench/tokenize_hf.js — HF tokenizers (native Rust binding, one thread) encode time for bench/tokenize.
//   RAYON_NUM_THREADS=1 node bench/tokenize_hf.js TOKENIZER_JSON TEXT_FILE [REPEATS]
// Prints "ids seconds" of the fastest of REPEATS (default 3) runs; each run loads a fresh
// tokenizer (cold BPE cache, as maskpos's runs) and times encode() alone.
"use strict";
const fs = require("fs");
const path = require("path");
const { Tokenizer } = require(path.join(__dirname, "../tests/oracle/node_modules/tokenizers"));

async function main() {
  const [tokFile, textFile, rep] = process.argv.slice(2);
  const text = fs.readFileSync(textFile).toString("utf8");
  let best = Infinity, n = 0;
  for (let r = 0; r < Number(rep || 3); r++) {
    const tok = Tokenizer.fromFile(tokFile);
    const t0 = process.hrtime.bigint();
    const enc = await tok.encode(text, null, { addSpecialTokens: true });
    const t1 = process.hrtime.bigint();
    n = enc.getIds().length;
    best = Math.min(best, Number(t1 - t0) / 1e9);
  }
  process.stdout.write(`${n} ${best}\n`);
}
main().catch((e) => { process.stderr.write(String(e) + "\n"); process.exit(1); });
