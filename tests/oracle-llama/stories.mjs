// stories.mjs — llama.cpp as an oracle for a real pretrained GGUF (stories260K): its own tokenizer
// and its greedy continuation (test-only; see tests/test_stories_oracle.c).
//
//   node stories.mjs tokenize MODEL.gguf TEXT_FILE     ids of the text, BOS first (as llama.cpp's
//                                                     tokenizer gives them with add_special)
//   node stories.mjs greedy MODEL.gguf N [ID,ID,...]   N tokens continued greedily from the prompt
//                                                     (default: BOS alone): at each step the id
//                                                     with the largest llama.cpp logit (the lowest
//                                                     id on ties), evaluated with its KV cache
// Prints the ids, space-separated, on one line. CPU backend, flash attention off, F32 KV cache.
import { readFileSync } from "node:fs";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const [mode, modelPath, arg, promptList] = process.argv.slice(2);
if (!mode || !modelPath || !arg || (mode !== "tokenize" && mode !== "greedy")) {
  console.error("usage: node stories.mjs tokenize MODEL.gguf TEXT_FILE | greedy MODEL.gguf N [ID,ID,...]");
  process.exit(2);
}
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
if (mode === "tokenize") {
  const text = readFileSync(arg, "utf8");
  const ids = model.tokenize(text, false);
  const bos = model.tokens.bos;
  console.log([...(bos === null ? [] : [bos]), ...ids].join(" "));
} else {
  const n = Number.parseInt(arg, 10);
  const prompt = promptList ? promptList.split(",").map((s) => Number.parseInt(s, 10)) : [model.tokens.bos];
  const context = await model.createContext({
    contextSize: Math.max(256, prompt.length + n + 1),
    batchSize: Math.max(256, prompt.length + n),
    sequences: 1,
    flashAttention: false,
    threads: 1,
    experimentalKvCacheKeyType: "F32",
    experimentalKvCacheValueType: "F32",
  });
  const seq = context.getSequence();
  const out = [];
  let next = prompt;
  for (let step = 0; step < n; step++) {
    const res = await seq.controlledEvaluate(next.map((t, i) => (i === next.length - 1 ? [t, { generateNext: { logits: true } }] : t)));
    const logits = res[res.length - 1]?.next?.logits;
    if (!logits) throw new Error(`no logits at step ${step}`);
    let best = -1;
    let bestV = -Infinity;
    for (const [tok, v] of logits) if (v > bestV || (v === bestV && tok < best)) [best, bestV] = [tok, v];
    out.push(best);
    next = [best];
  }
  console.log(out.join(" "));
  await context.dispose();
}
await model.dispose();
await llama.dispose();
