#!/usr/bin/env bash
# Regenerates model/token/hf/unicode16.go: the Unicode data in which the Rust
# tokenizers library (through its Node binding, the tokenizer of record for the
# goldens) differs from Go's unicode and x/text tables. Every table is read back
# from the Rust library itself, code point by code point:
#   - \p{L} and \p{N} of its Oniguruma (Unicode 16.0; Go's unicode is 15.0),
#   - its Lowercase normalizer (Rust std char::to_lowercase),
#   - its NFD/NFKC/NFKD normalizers (an older Unicode than x/text),
#   - the marks its StripAccents normalizer removes,
#   - the general categories (\p{Lu}, \p{M}, ...) of its Oniguruma, for regexp2.
# Usage: scripts/gen-hf-unicode.sh   (needs node >= 18 and npm; installs into a temp dir)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
QWEN=$ROOT/model/token/hf/testdata/qwen3/tokenizer.json
(cd "$TMP" && npm init -y >/dev/null && npm install --ignore-scripts --no-audit --no-fund \
	@anush008/tokenizers@0.6.0 @anush008/tokenizers-linux-x64-gnu@0.6.0 >/dev/null)
cat >"$TMP/probe.mjs" <<'EOF'
import { Tokenizer, nfdNormalizer, nfkcNormalizer, nfkdNormalizer, lowercase, stripAccentsNormalizer } from "@anush008/tokenizers";
const cps = [];
for (let c = 2; c < 0x110000; c++) if (c < 0xD800 || c > 0xDFFF) cps.push(c);
const out = { L: [], N: [], norm: {}, marks: [] };
// Classes under the Qwen pattern: probe "x" + c + "!\n".
const pre = Tokenizer.fromFile(process.argv[2]).getPreTokenizer();
const bl = new Map();
{ let n = 0; for (let b = 0; b < 256; b++) { let r; if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) r = b; else r = 256 + n++; bl.set(String.fromCodePoint(r), b); } }
const dec = (p) => Buffer.from([...p].map((ch) => bl.get(ch))).toString("utf8");
const skip = new Set([0x0A, 0x0D, 0x20, 0x21, 0x78, 0x85]);
for (let i = 0; i < cps.length; i += 8192) {
  const chunk = cps.slice(i, i + 8192).filter((c) => !skip.has(c) && !/\s/u.test(String.fromCodePoint(c)));
  const pieces = pre.preTokenizeString(chunk.map((c) => "x" + String.fromCodePoint(c) + "!\n").join("")).map((p) => dec(p[0]));
  let k = 0;
  for (const c of chunk) {
    const ch = String.fromCodePoint(c);
    if (pieces[k] === "x" + ch) { out.L.push(c); k += 2; }
    else if (pieces[k] === "x" && pieces[k + 1] === ch + "!\n") { k += 2; }
    else if (pieces[k] === "x" && pieces[k + 1] === ch && pieces[k + 2] === "!\n") { out.N.push(c); k += 3; }
    else throw new Error("unexpected pieces at U+" + c.toString(16));
  }
}
out.L.push(0x78);
const forms = { nfd: nfdNormalizer(), nfkc: nfkcNormalizer(), nfkd: nfkdNormalizer(), lower: lowercase() };
for (const [name, n] of Object.entries(forms)) {
  const diff = [];
  for (let i = 0; i < cps.length; i += 65536) {
    const chunk = cps.slice(i, i + 65536);
    const parts = n.normalizeString(chunk.map((c) => String.fromCodePoint(c)).join("\x01")).split("\x01");
    for (let k = 0; k < chunk.length; k++) if (parts[k] !== String.fromCodePoint(chunk[k])) diff.push([chunk[k], parts[k]]);
  }
  out.norm[name] = diff;
}
const sa = stripAccentsNormalizer();
for (let i = 0; i < cps.length; i += 65536) {
  const chunk = cps.slice(i, i + 65536);
  const parts = sa.normalizeString(chunk.map((c) => "\x01" + String.fromCodePoint(c)).join("")).split("\x01").slice(1);
  for (let k = 0; k < chunk.length; k++) if (parts[k] === "") out.marks.push(chunk[k]);
}
// General categories for the regexp2 fallback: the code points Oniguruma's \p{X}
// matches, read with a Split that removes "\x01c\x02" when c is in the class.
const classOf = (cls) => {
  const tj = { version: "1.0", added_tokens: [], normalizer: null, post_processor: null, decoder: null,
    pre_tokenizer: { type: "Split", pattern: { Regex: "\\x01\\p{" + cls + "}\\x02" }, behavior: "Removed", invert: false },
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: false, byte_fallback: false, vocab: {}, merges: [] } };
  const split = Tokenizer.fromString(JSON.stringify(tj)).getPreTokenizer();
  const kept = new Set();
  for (let i = 0; i < cps.length; i += 65536) {
    const chunk = cps.slice(i, i + 65536).filter((c) => c > 2);
    for (const [p] of split.preTokenizeString(chunk.map((c) => "\x01" + String.fromCodePoint(c) + "\x02").join(""))) {
      for (const ch of p) kept.add(ch.codePointAt(0));
    }
  }
  return cps.filter((c) => c > 2 && !kept.has(c));
};
out.cats = {};
for (const cls of ["Lu", "Ll", "Lt", "Lm", "Lo", "M", "Mn", "Mc", "Me", "Nd", "Nl", "No"]) out.cats[cls] = classOf(cls);
process.stdout.write(JSON.stringify(out));
EOF
(cd "$TMP" && node probe.mjs "$QWEN") >"$TMP/probe.json"
go run model/token/hf/gen_unicode.go "$TMP/probe.json" >"$TMP/unicode16.go"
gofmt "$TMP/unicode16.go" >model/token/hf/unicode16.go
echo "wrote model/token/hf/unicode16.go"
