#!/usr/bin/env bash
# Differential test of the pure-Go tokenizer (model/token/hf) against Hugging
# Face's Rust tokenizers (0.22.2, through the Node binding @anush008/tokenizers
# 0.6.0, the tokenizer of record for the goldens) on tokenizer.json files the Go
# code was not developed against (issue 5: "another byte-level BPE model must work
# unchanged"). For every text of a fixed corpus (scripts/tokdiff/corpus.mjs) and
# every tokenizer, the Rust library writes the ids without and with special tokens
# and the pre-tokenizer's pieces (scripts/tokdiff/encode.mjs); then model/token/hf's
# TestDifferential compares Encode and PreTokenize with them, and this prints the
# exact share per tokenizer.
#
# Usage: scripts/diff-tokenizers.sh [-o results.md] [-k dir] [name=path/to/tokenizer.json ...]
#   -o FILE  also write the summary as markdown to FILE
#   -k DIR   keep the corpus and the Rust outputs in DIR (default: a temp dir, removed)
#   DIFF_RANDOM  how many seeded random strings the corpus ends with (default 2000)
#   name=path pairs replace the default set: Qwen3 and Mistral-7B (the goldens'
#   tokenizers, as controls) and the tokenizer.json files in the test data of
#   github.com/daulet/tokenizers (a module dependency): Meta-Llama-3-8B-Instruct,
#   Cohere, bert-base-uncased, all-MiniLM-L6-v2, LaBSE.
# Exits non-zero when a tokenizer that Load accepts differs from the Rust library
# on any text, or when Load refuses one for a reason other than an unsupported
# component. A refusal that says "is not supported" is reported, not failed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=""
KEEP=""
while getopts "o:k:" opt; do
	case $opt in
	o) OUT=$OPTARG ;;
	k) KEEP=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))

if [[ -n "$KEEP" ]]; then
	DIR=$KEEP
	mkdir -p "$DIR"
else
	DIR=$(mktemp -d)
	trap 'rm -rf "$DIR"' EXIT
fi
DIR=$(cd "$DIR" && pwd)

go mod download github.com/daulet/tokenizers
DATA=$(go list -m -f '{{.Dir}}' github.com/daulet/tokenizers)/test/data
DAULET=$(go list -m -f '{{.Path}}@{{.Version}}' github.com/daulet/tokenizers)
TD=$ROOT/model/token/hf/testdata

if [[ $# -gt 0 ]]; then
	PAIRS=("$@")
else
	PAIRS=(
		"qwen3=$TD/qwen3/tokenizer.json"
		"mistral7b=$TD/mistral7b/tokenizer.json"
		"llama3-8b-instruct=$DATA/Meta-Llama-3-8B-Instruct.json"
		"cohere=$DATA/cohere-tokenizer.json"
		"bert-base-uncased=$DATA/bert-base-uncased.json"
		"all-minilm-l6-v2=$DATA/all-minilm-l6-v2.json"
		"labse=$DATA/sentence-transformers-labse.json"
	)
fi

if ! [[ -d scripts/tokdiff/node_modules/@anush008/tokenizers ]]; then
	echo "== npm ci in scripts/tokdiff (@anush008/tokenizers 0.6.0)" >&2
	(cd scripts/tokdiff && npm ci --ignore-scripts --no-audit --no-fund >/dev/null)
fi

echo "== corpus" >&2
RANDOM_TEXTS=${DIFF_RANDOM:-2000}
node scripts/tokdiff/corpus.mjs "$TD" "$DATA" "$RANDOM_TEXTS" >"$DIR/texts.jsonl"
TEXTS=$(wc -l <"$DIR/texts.jsonl")
echo "$TEXTS texts in $DIR/texts.jsonl" >&2

echo "== Rust (Hugging Face tokenizers 0.22.2 via @anush008/tokenizers 0.6.0)" >&2
LIST=""
: >"$DIR/rust-errors.txt"
for pair in "${PAIRS[@]}"; do
	name=${pair%%=*}
	path=$(cd "$(dirname "${pair#*=}")" && pwd)/$(basename "${pair#*=}")
	LIST+="${LIST:+,}$name=$path"
	rm -f "$DIR/$name".{ids,sids,pretok}
	if ! err=$(cd scripts/tokdiff && node encode.mjs "$DIR" "$name" "$path" 2>&1); then
		# The Rust library itself refused (LaBSE's test file has a 14-entry vocabulary
		# without [UNK]): Go's Load is still run, there is nothing to compare.
		msg=$(grep -m1 -o 'Error: .*' <<<"$err" | sed 's/\] {$//' || tail -1 <<<"$err")
		echo "$name: Rust failed: $msg" >&2
		printf '%s\t%s\n' "$name" "$msg" >>"$DIR/rust-errors.txt"
		rm -f "$DIR/$name".{ids,sids,pretok}
	else
		echo "$err" >&2
	fi
done

echo "== Go" >&2
CMD=(go test ./model/token/hf/ -run '^TestDifferential$' -v -count=1)
set +e
HF_DIFF_DIR=$DIR HF_DIFF_TOKENIZERS=$LIST "${CMD[@]}" >"$DIR/go-test.txt" 2>&1
GORC=$?
set -e
cat "$DIR/go-test.txt"

# Summary: one row per tokenizer from the -v output (the subtests run in order).
SUMMARY=$(node - "$DIR" "$LIST" <<'EOF'
const fs = require("fs");
const [dir, list] = process.argv.slice(2);
const lines = fs.readFileSync(`${dir}/go-test.txt`, "utf8").split("\n");
const rustErr = Object.fromEntries(fs.readFileSync(`${dir}/rust-errors.txt`, "utf8").split("\n").filter(Boolean).map((l) => l.split("\t")));
const modelType = (p) => {
  const m = JSON.parse(fs.readFileSync(p, "utf8")).model || {};
  return m.type || (m.merges ? "BPE (untyped)" : m.continuing_subword_prefix !== undefined ? "WordPiece (untyped)" : "?");
};
const rows = [];
let cur = null;
const by = {};
for (const l of lines) {
  let m;
  if ((m = l.match(/^=== RUN\s+TestDifferential\/(\S+)/))) { cur = m[1]; by[cur] ??= { load: "", counts: {}, result: "" }; continue; }
  if ((m = l.match(/^\s+--- (PASS|FAIL|SKIP): TestDifferential\/(\S+)/))) { by[m[2]].result = m[1]; continue; }
  if (!cur) continue;
  if ((m = l.match(/^\s+diff_test\.go:\d+: Load: (.*)/))) by[cur].load = m[1];
  else if ((m = l.match(/^\s+diff_test\.go:\d+: \S+: (ids with special tokens|ids|pre-tokens) (\d+)\/(\d+)$/))) by[cur].counts[m[1]] = [+m[2], +m[3]];
}
// Rounded down, so that only an exact run shows 100%.
const share = (c) => (c ? `${c[0]}/${c[1]} (${c[0] === c[1] ? "100" : (Math.floor((10000 * c[0]) / c[1]) / 100).toFixed(2)}%)` : "–");
let failed = false;
let out = "| tokenizer | model | ids, no special | ids, special | pre-tokens | verdict |\n|---|---|---|---|---|---|\n";
for (const pair of list.split(",")) {
  const name = pair.slice(0, pair.indexOf("="));
  const r = by[name] || { load: "not run", counts: {}, result: "" };
  const c = r.counts;
  let verdict;
  if (r.load) {
    const unsupported = r.load.includes("is not supported");
    failed ||= !unsupported;
    verdict = `${unsupported ? "unsupported" : "FAIL"}: Load: ${r.load}`;
  } else if (rustErr[name]) {
    verdict = `Rust failed: ${rustErr[name]}`;
  } else {
    const exact = Object.values(c).length > 0 && Object.values(c).every(([a, b]) => a === b);
    failed ||= !exact || r.result !== "PASS";
    verdict = exact && r.result === "PASS" ? "exact" : "MISMATCH";
  }
  let type = "?";
  try { type = modelType(pair.slice(name.length + 1)); } catch {}
  out += `| ${name} | ${type} | ${share(c["ids"])} | ${share(c["ids with special tokens"])} | ${share(c["pre-tokens"])} | ${verdict.replaceAll("|", "\\|")} |\n`;
}
console.log(out);
console.log(failed ? "RESULT: FAIL" : "RESULT: OK");
EOF
)
echo
echo "texts: $TEXTS"
echo "$SUMMARY"

if [[ -n "$OUT" ]]; then
	{
		echo "# Differential test: model/token/hf against Hugging Face tokenizers (Rust)"
		echo
		echo "Date: $(date -u +%Y-%m-%d). Go $(go env GOVERSION), Node $(node --version). Rust: tokenizers 0.22.2 via @anush008/tokenizers 0.6.0 (scripts/tokdiff/package-lock.json)."
		echo "Command: \`scripts/diff-tokenizers.sh -o $OUT\`, which runs"
		echo "\`HF_DIFF_DIR=<dir> HF_DIFF_TOKENIZERS=<name=path,...> go test ./model/token/hf/ -run '^TestDifferential\$' -v -count=1\`"
		echo "(go test exit status $GORC: the subtests of tokenizers that Load refuses fail; the verdict column classifies them)."
		if [[ $# -eq 0 ]]; then
			echo "Tokenizer files other than Qwen3 and Mistral-7B: \`test/data/\` of $DAULET."
			echo "Not tested there: \`kimi-k2-instruct/\` and \`meta-llama-3-8b-instruct/\` hold \`tiktoken.model\` files (tiktoken"
			echo "ranks, also \`Meta-Llama-3-8B-Instruct.model\`), not tokenizer.json: neither Load nor the Rust library's"
			echo "Tokenizer.fromFile reads them (transformers converts them to a tokenizer.json in Python)."
		fi
		echo
		echo "Corpus ($TEXTS texts, scripts/tokdiff/corpus.mjs): the Qwen3 text, pre-tokenizer and rendered-chat goldens;"
		echo "long_text.txt whole and by paragraph; hand-written numbers, contractions (every case), CJK, emoji, whitespace runs,"
		echo "code, combining marks, other scripts and other models' special tokens as text; $RANDOM_TEXTS seeded random strings drawn"
		echo "from characters at the pre-tokenizer regexes' class boundaries."
		echo "Each cell: texts on which Go's ids (Encode, add_special_tokens false/true) or pieces (PreTokenize vs"
		echo "pre_tokenize_str) equal the Rust library's exactly. \"–\": nothing to compare (no pre-tokenizer, or not loaded)."
		echo
		echo "$SUMMARY"
	} >"$OUT"
	echo "wrote $OUT" >&2
fi
[[ "$SUMMARY" == *"RESULT: OK"* ]]
