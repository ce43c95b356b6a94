// pp_bench.mjs — llama.cpp prompt-processing throughput for bench/probe (not a test).
//
// Loads a GGUF with llama.cpp's prebuilt CPU backend (node-llama-cpp), evaluates N random
// sequences of S token ids (flash attention off, as in the oracle; default F16 KV cache), each in
// a fresh sequence state, and prints "pp_tokens_per_s X" and "pp_seconds Y" (evaluation only,
// model load excluded).
// usage: node pp_bench.mjs MODEL.gguf S N THREADS VOCAB
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const [modelPath, sArg, nArg, thArg, vArg] = process.argv.slice(2);
const S = Number(sArg), N = Number(nArg), threads = Number(thArg), V = Number(vArg);
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error, maxThreads: threads });
const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
const context = await model.createContext({ contextSize: S, batchSize: S, sequences: 1, flashAttention: false, threads });
let seed = 1;
const rnd = () => ((seed = (seed * 1664525 + 1013904223) >>> 0) >>> 8) % V;
let total = 0;
for (let n = 0; n < N; n++) {
  const seq = context.getSequence();
  const ids = Array.from({ length: S }, rnd);
  const t0 = process.hrtime.bigint();
  await seq.evaluateWithoutGeneratingNewTokens(ids);
  total += Number(process.hrtime.bigint() - t0) / 1e9;
  seq.dispose();
}
console.log(`pp_tokens_per_s ${((N * S) / total).toFixed(1)}`);
console.log(`pp_seconds ${total.toFixed(2)}`);
await context.dispose();
await model.dispose();
await llama.dispose();
