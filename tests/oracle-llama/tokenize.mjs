// tokenize.mjs — llama.cpp's own tokenizer as the oracle for maskpos's GGUF SentencePiece
// tokenizer (test-only; see tests/test_tok_spm.c).
//
//   node tokenize.mjs MODEL.gguf [--no-parse-special] FILE...
// For each FILE prints one line: the ids of llama.cpp's tokenize (common_tokenize with
// add_special false, parse_special true unless --no-parse-special) of the file's bytes read as
// UTF-8 (invalid sequences → U+FFFD, the WHATWG rule).
//   node tokenize.mjs MODEL.gguf --decode [--skip-special] FILE...
// Each FILE holds ids separated by white space; prints, per file, the byte length of llama.cpp's
// detokenize of them (remove_special false; unparse_special true unless --skip-special), a
// newline, then the text itself.
// The model is loaded vocabulary-only, so a GGUF holding only tokenizer.ggml.* keys works.
import { readFileSync } from "node:fs";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const argv = process.argv.slice(2);
if (argv.length < 2) {
  console.error("usage: node tokenize.mjs MODEL.gguf [--no-parse-special|--decode [--skip-special]] FILE...");
  process.exit(2);
}
let parseSpecial = true, decode = false, keepSpecial = true;
const files = [];
for (const a of argv.slice(1)) {
  if (a === "--no-parse-special") parseSpecial = false;
  else if (a === "--decode") decode = true;
  else if (a === "--skip-special") keepSpecial = false;
  else files.push(a);
}
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath: argv[0], gpuLayers: 0, vocabOnly: true });
for (const f of files) {
  const buf = readFileSync(f);
  if (decode) {
    const ids = buf.toString("latin1").split(/\s+/).filter((s) => s.length).map(Number);
    const text = Buffer.from(model.detokenize(ids, keepSpecial), "utf8");
    process.stdout.write(`${text.length}\n`);
    process.stdout.write(text);
    continue;
  }
  const ids = model.tokenize(buf.toString("utf8"), parseSpecial);
  process.stdout.write(Array.from(ids).join(" ") + "\n");
}
await model.dispose();
await llama.dispose();
