// Writes the Rust library's outputs for every line of <dir>/texts.jsonl, one JSON
// array a line, as model/token/hf's TestDifferential reads them:
//   node encode.mjs <dir> <name> <path/to/tokenizer.json>
//   <dir>/<name>.ids     encode(text, add_special_tokens=false).ids
//   <dir>/<name>.sids    encode(text, add_special_tokens=true).ids
//   <dir>/<name>.pretok  pre_tokenize_str(text) pieces (no normalizer, no added
//                        tokens), only when the tokenizer has a pre-tokenizer
// Hugging Face tokenizers 0.22.2 through @anush008/tokenizers 0.6.0, the binding
// the goldens in model/token/hf/testdata were made with.
import fs from "node:fs";
import { Tokenizer } from "@anush008/tokenizers";

const [dir, name, path] = process.argv.slice(2);
const texts = fs.readFileSync(`${dir}/texts.jsonl`, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
const tok = Tokenizer.fromFile(path);
const ids = [];
const sids = [];
for (const text of texts) {
  ids.push(JSON.stringify((await tok.encode(text, null, { addSpecialTokens: false })).getIds()));
  sids.push(JSON.stringify((await tok.encode(text, null, { addSpecialTokens: true })).getIds()));
}
fs.writeFileSync(`${dir}/${name}.ids`, ids.join("\n") + "\n");
fs.writeFileSync(`${dir}/${name}.sids`, sids.join("\n") + "\n");
const pre = tok.getPreTokenizer();
if (pre) {
  const pieces = texts.map((text) => JSON.stringify(pre.preTokenizeString(text).map((p) => p[0])));
  fs.writeFileSync(`${dir}/${name}.pretok`, pieces.join("\n") + "\n");
}
console.error(`${name}: ${texts.length} texts${pre ? "" : " (no pre-tokenizer)"}`);
