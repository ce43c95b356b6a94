// logits.mjs — llama.cpp as an oracle for `maskpos logits` (test-only; see tests/test_model_oracle.c).
//
// Runs a GGUF model with llama.cpp's prebuilt CPU backend (through node-llama-cpp) on the given token
// ids, with flash attention off and an F32 key/value cache, and writes the next-token logits of
// every position: OUT is raw little-endian float64 [T, V] (row t = logits after token t), and
// stdout gets one line "T V". The tokens are evaluated exactly as given (no BOS added).
// usage: node logits.mjs MODEL.gguf ID,ID,... OUT.f64
import { writeFileSync } from "node:fs";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const [modelPath, list, outPath] = process.argv.slice(2);
if (!modelPath || !list || !outPath) {
  console.error("usage: node logits.mjs MODEL.gguf ID,ID,... OUT.f64");
  process.exit(2);
}
const ids = list.split(",").map((s) => Number.parseInt(s, 10));
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
// one free cell beyond the ids: with a context exactly full, the last position's logits come out
// different (measured on stories260K at 512 tokens: 0.66 in a log-prob)
const context = await model.createContext({
  contextSize: Math.max(256, ids.length + 1),
  batchSize: Math.max(256, ids.length),
  sequences: 1,
  flashAttention: false,
  threads: 1,
  experimentalKvCacheKeyType: "F32",
  experimentalKvCacheValueType: "F32",
});
const seq = context.getSequence();
const res = await seq.controlledEvaluate(ids.map((t) => [t, { generateNext: { logits: true } }]));
let V = 0;
for (const r of res) if (r?.next?.logits) V = Math.max(V, r.next.logits.size);
const out = new Float64Array(ids.length * V).fill(Number.NaN);
res.forEach((r, t) => {
  if (!r?.next?.logits) throw new Error(`no logits for position ${t}`);
  for (const [tok, logit] of r.next.logits) out[t * V + tok] = logit;
});
writeFileSync(outPath, Buffer.from(out.buffer));
console.log(`${ids.length} ${V}`);
await context.dispose();
await model.dispose();
await llama.dispose();
