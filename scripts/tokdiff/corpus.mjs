// Writes the texts of the differential test, one JSON string a line, to stdout:
//   node corpus.mjs <model/token/hf/testdata> <daulet/tokenizers test/data> [random count, default 2000]
// Sources, in this order (the same every run: the random part has a fixed seed):
//   1. the Qwen3 text goldens and the texts of its pre-tokenizer goldens (they hold
//      every Unicode whitespace character in runs, special-token look-alikes, code),
//   2. the Qwen3 chat goldens' rendered prompts,
//   3. long_text.txt from github.com/daulet/tokenizers, whole and by paragraph,
//   4. hand-written tricky strings: numbers, contractions, CJK, emoji, whitespace
//      runs, code, combining marks, other scripts, other models' special tokens,
//   5. random strings drawn from a pool of characters at the regexes' class
//      boundaries (letters, marks, digits of every kind, apostrophes, spaces, line
//      breaks, punctuation, emoji).
// Texts are valid UTF-8 (the Rust library cannot receive anything else) and are
// not deduplicated across sources except for exact repeats.
import fs from "node:fs";

const [td, daulet, randomArg] = process.argv.slice(2);
const randomCount = randomArg ? Number(randomArg) : 2000;
const out = [];
const seen = new Set();
const add = (s) => {
  if (typeof s !== "string" || seen.has(s)) return;
  seen.add(s);
  out.push(s);
};
const jsonl = (p) => fs.readFileSync(p, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));

// 1, 2: the Qwen3 goldens.
for (const g of jsonl(`${td}/qwen3/text_goldens.jsonl`)) add(g.text);
for (const g of jsonl(`${td}/qwen3/pretok_goldens.jsonl`)) add(g.text);
for (const g of jsonl(`${td}/qwen3/goldens.jsonl`)) add(g.rendered_prompt);

// 3: long_text.txt, whole and by paragraph.
const long = fs.readFileSync(`${daulet}/long_text.txt`, "utf8");
add(long);
for (const p of long.split(/\n\s*\n/)) if (p.trim()) add(p);

// 4: hand-written cases.
const tricky = [
  // numbers
  "1", "12", "123", "1234", "12345", "1234567890", "3.14159", "-0.5e-10", "1,000,000", "1 000 000",
  "2026-11-29T19:26:00Z", "+1 (555) 010-9999", "0x1F 0b1010 0o777 1e9 1_000_000", "v1.24.0", "ID12345abc678",
  "abc123def4567ghi", "１２３４５ full width", "٣٤٥٦ Arabic-Indic", "०१२३४ Devanagari", "x² + y³ = z⁴",
  "½ ¼ ¾ ⅓", "Ⅻ Ⅳ ⅷ roman", "①②③ ⑩", "𝟘𝟙𝟚 math digits", "12345678901234567890123456789",
  "$1,299.99 €5 £3 ¥100", "99%", "3/4 cups", "10:30am", "192.168.0.1:8080",
  // contractions
  "don't DON'T Don'T", "I'm I'M i'm", "you're YOU'RE You'Re", "we've WE'VE", "he'll HE'LL", "she'd SHE'D",
  "it's IT'S It'S", "'s 't 're 've 'm 'll 'd", "'S 'T 'RE 'VE 'M 'LL 'D", "rock'n'roll", "'twas", "y'all",
  "the dogs' bones", "it’s curly ’s ’S", "O'Neil's", "''s", "'''", "a'b'c'd", "' s", "'1", "'ʼs",
  "Ǆ'Ll ǅ'Ll ǆ'll", "İ'S ı's", "ſ'S", "K'S", "ß'S", "ﬁ'LL",
  // CJK
  "你好，世界！今天天气很好。", "日本語のテキストとカタカナ、ひらがな。", "한국어 텍스트입니다. 안녕하세요!",
  "中文English混合text123数字", "我爱北京天安门", "ｶﾀｶﾅ half width", "〇一二三", "𠀀𠀁 CJK ext B", "漢字\u3000全角空白",
  // emoji
  "😀😃😄", "👍🏽 👩‍👩‍👧‍👦 🏳️‍🌈", "🇫🇷🇩🇪🇯🇵", "1️⃣ #️⃣ *️⃣", "❤️ ♥ ✨", "hello👋world", "🤖: beep", "a😀b😀c",
  // whitespace runs
  " ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", "\n\n\n", " \n ", "  \n\n  ", "a  b   c    d", "a\tb\t\tc",
  "trailing   ", "   leading", "\n\nleading newlines", "line1\r\nline2\r\n", "line\n  indented\n    more",
  "x \t \n y", "a\u00a0b\u00a0\u00a0c", "a\u2009b\u200bc\u2028d\u2029e", "\u3000\u3000x", "a \u00a0 b", " ,", " .\n",
  "end.\n\n\n\n", "    ", "\t\t\tdef", " \r\r\n\n x", "x\u0085y", "\v\f",
  // code
  "func main() {\n\tfmt.Println(\"hi\")\n}\n", "def f(x):\n    return x**2  # square\n",
  "if (a && b || !c) { return a->b; }", "const re = /^[a-z]+(?:\\d{2,3})?$/i;", "SELECT * FROM t WHERE id = 42;",
  "<div class=\"x\">Hello &amp; bye</div>", "{\"key\": [1, 2.5, null, true], \"nested\": {\"a\": \"b\"}}",
  "$ ls -la | grep '.go' && echo ok", "x += 1; y -= 2; z *= 3; w /= 4; v %= 5;", "a==b!=c<=d>=e", "i++ --j",
  "#include <stdio.h>\nint main(void){printf(\"%d\\n\",1);}", "let v: Vec<u8> = vec![0u8; 16];", "@@ -1,3 +1,4 @@",
  "    # indented comment\n        deeper", "https://example.com/path?q=1&r=two#frag", "user@example.org",
  // combining marks, normalization
  "e\u0301", "cafe\u0301 cafè", "n\u0303a\u0303", "Å Å Å", "ﬁ ﬂ ﬃ", "Ⅸ ㎏ ㍿", "x\u0308\u0301",
  "\u0301leading mark", "ä\u0308", "한 한", "がが",
  // other scripts
  "Привет, мир! Как дела?", "Γειά σου Κόσμε", "مرحبا بالعالم ١٢٣", "שלום עולם", "नमस्ते दुनिया",
  "สวัสดีชาวโลก", "Xin chào thế giới", "Ελληνικά ΣΊΣΥΦΟΣ", "ქართული", "Հայերեն", "ᚠᛇᚻ runes",
  "𝐀𝐁𝐂 𝔸𝔹ℂ math letters", "İstanbul ıi", "Straße STRASSE",
  // other models' special tokens, as text
  "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>",
  "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|><|eot_id|>", "<|reserved_special_token_5|>",
  "<BOS_TOKEN><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hello<EOS_TOKEN>", "<EOP_TOKEN>x", "<PAD><UNK>",
  "[CLS] hello [SEP] world [SEP]", "[MASK] [UNK] [PAD]", "<s>[INST] hi [/INST]</s>", "<|im_start|>user\nhi<|im_end|>",
  "<|endoftext|>", "< |eot_id| >", "<|eot_id", "eot_id|>", "<<|eot_id|>>",
  // long runs
  "a".repeat(300), "!".repeat(200), "1".repeat(100), " ".repeat(100) + "x", "\n".repeat(50), "ab".repeat(150),
  "😀".repeat(40), "中".repeat(120), "-".repeat(80) + "\n" + "=".repeat(80), "supercalifragilisticexpialidocious".repeat(5),
];
for (const s of tricky) add(s);

// 5: random strings at class boundaries, seeded (mulberry32) so every run is the same.
let seed = 0x5eed2026;
const rnd = () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const pick = (a) => a[Math.floor(rnd() * a.length)];
const pool = [
  ..."abcxyzABCXYZ", "é", "ß", "Ǆ", "ǅ", "ı", "ſ", "K", "ﬁ", "中", "日", "한", "カ", "ж", "λ", "م", "א", "ह", "ก", "𝐀", "ª", "ʰ",
  "\u0301", "\u0308", "\u093f", "\u0e31", "\u20dd",
  ..."0123456789", "٣", "１", "²", "½", "Ⅻ", "①", "𝟘",
  "'", "'", "'", "’", "ʼ", "s", "t", "re", "ve", "m", "ll", "d", "S", "T", "RE", "LL",
  " ", " ", " ", " ", "\t", "\n", "\n", "\r", "\r\n", "\u00a0", "\u3000", "\u2028", "\u0085", "\u200b", "\v", "\f",
  ...".,;:!?-_()[]{}<>\"/\\@#$%^&*+=|~`", "。", "，", "—", "…", "«", "»",
  "😀", "👍🏽", "👩‍👧", "🇫🇷", "❤️", "©", "™",
  "the", " the", "Hello", " world", "don't", "I'm", "123", " 4567", "<|eot_id|>", "<EOS_TOKEN>", "[SEP]",
];
// Half of them short (up to 12 draws), half longer (up to 48).
for (let i = 0; i < randomCount; i++) {
  const n = 1 + Math.floor(rnd() * (i < randomCount / 2 ? 12 : 48));
  let s = "";
  for (let k = 0; k < n; k++) s += pick(pool);
  add(s);
}

process.stdout.write(out.map((s) => JSON.stringify(s)).join("\n") + "\n");
