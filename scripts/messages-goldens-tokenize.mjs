// Tokenizer of record for scripts/gen-messages-goldens.py: the Rust
// `tokenizers` crate through its Node bindings (@anush008/tokenizers), which
// is the library transformers' fast tokenizers wrap.
//
// usage: node messages-goldens-tokenize.mjs NODE_MODULES_DIR TOKENIZER_JSON
// stdin : JSON lines {"text": str} or {"decode": [int, ...]}
// stdout: JSON lines {"ids": [int, ...]} (encode(text, add_special_tokens=False))
//         or {"text": str} (decode(ids, skip_special_tokens=False))
import { createRequire } from "node:module";
import path from "node:path";
import readline from "node:readline";

const [modules, tokenizerJSON] = process.argv.slice(2);
if (!modules || !tokenizerJSON) {
  console.error("usage: node messages-goldens-tokenize.mjs NODE_MODULES_DIR TOKENIZER_JSON");
  process.exit(2);
}
const require = createRequire(path.join(path.resolve(modules), "package.json"));
const { Tokenizer } = require("@anush008/tokenizers");
const tok = Tokenizer.fromFile(tokenizerJSON);

const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (line === "") continue;
  const req = JSON.parse(line);
  if (req.decode) {
    const text = await tok.decode(req.decode, false);
    process.stdout.write(JSON.stringify({ text }) + "\n");
    continue;
  }
  const enc = await tok.encode(req.text, null, { addSpecialTokens: false });
  process.stdout.write(JSON.stringify({ ids: Array.from(enc.getIds()) }) + "\n");
}
