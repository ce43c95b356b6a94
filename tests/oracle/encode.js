#!/usr/bin/env node
// encode.js — reference token ids from HF tokenizers' native binding (test oracle, issue 9).
//
//   node encode.js TOKENIZER_JSON [--no-special] FILE...
// For each FILE prints one line: the ids of HF `Tokenizer.encode(text)` separated by spaces, where
// text is the file's bytes decoded as UTF-8 with invalid sequences replaced by U+FFFD (the WHATWG
// rule, the same as Python's errors="replace"). --no-special: addSpecialTokens false (no BOS/EOS).
//   node encode.js TOKENIZER_JSON --decode FILE...
// FILE holds ids separated by whitespace; prints the decoded text (skip_special_tokens false) raw.
//   node encode.js TOKENIZER_JSON --decode-framed [--skip-special] FILE...
// The same for several files: per file the byte length of the text, a newline, then the text
// (skip_special_tokens true with --skip-special).
// Tested by: tests/test_tok.c (compares these ids with maskpos's, one by one).
"use strict";
const fs = require("fs");
const { Tokenizer } = require("tokenizers");

async function main() {
  const argv = process.argv.slice(2);
  if (argv.length < 2) {
    process.stderr.write("usage: node encode.js TOKENIZER_JSON [--no-special|--decode] FILE...\n");
    process.exit(2);
  }
  const tok = Tokenizer.fromFile(argv[0]);
  let addSpecial = true, decode = false, framed = false, skipSpecial = false;
  const files = [];
  for (const a of argv.slice(1)) {
    if (a === "--no-special") addSpecial = false;
    else if (a === "--decode") decode = true;
    else if (a === "--decode-framed") decode = framed = true;
    else if (a === "--skip-special") skipSpecial = true;
    else files.push(a);
  }
  for (const f of files) {
    const buf = fs.readFileSync(f);
    if (decode) {
      const ids = buf.toString("latin1").split(/\s+/).filter((s) => s.length).map(Number);
      const text = await tok.decode(ids, skipSpecial);
      if (framed) process.stdout.write(`${Buffer.byteLength(text, "utf8")}\n`);
      process.stdout.write(text);
      continue;
    }
    const enc = await tok.encode(buf.toString("utf8"), null, { addSpecialTokens: addSpecial });
    process.stdout.write(enc.getIds().join(" ") + "\n");
  }
}
main().catch((e) => {
  process.stderr.write("encode.js: " + (e && e.stack ? e.stack : e) + "\n");
  process.exit(1);
});
