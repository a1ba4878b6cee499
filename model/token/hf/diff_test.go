package hf

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestDifferential compares Encode (and PreTokenize) with ids that the Rust
// library produced for the same texts, when HF_DIFF_DIR names a directory holding
// texts.jsonl (one JSON string a line) and, per tokenizer, the Rust outputs for
// each line as JSON arrays: <name>.ids (encode, add_special_tokens=false),
// <name>.sids (add_special_tokens=true) and <name>.pretok (pre_tokenize_str),
// any of them optional. They come from the Node binding the goldens were made
// with (@anush008/tokenizers 0.6.0). HF_DIFF_TOKENIZERS lists
// name=path/to/tokenizer.json pairs, comma separated.
func TestDifferential(t *testing.T) {
	dir := os.Getenv("HF_DIFF_DIR")
	if dir == "" {
		t.Skip("HF_DIFF_DIR not set")
	}
	texts := readLines[string](t, filepath.Join(dir, "texts.jsonl"))
	for _, pair := range splitList(os.Getenv("HF_DIFF_TOKENIZERS")) {
		name, path, _ := cut(pair, "=")
		t.Run(name, func(t *testing.T) {
			tj, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			tok, err := Load(tj, nil)
			if err != nil {
				// scripts/diff-tokenizers.sh reads this line: a refusal that says
				// "is not supported" is reported as unsupported, any other as a failure.
				t.Fatalf("Load: %v", err)
			}
			if _, err := os.Stat(filepath.Join(dir, name+".ids")); err == nil {
				ids := readLines[[]uint32](t, filepath.Join(dir, name+".ids"))
				bad := 0
				for i, want := range ids {
					got := tok.Encode(nil, texts[i], false)
					if !slices.Equal(got, want) {
						bad++
						if bad <= 5 {
							t.Errorf("text %d %q\n%s", i, texts[i], diffIDs(tok, got, want))
						}
					}
				}
				t.Logf("%s: ids %d/%d", name, len(ids)-bad, len(ids))
			}
			if _, err := os.Stat(filepath.Join(dir, name+".sids")); err == nil {
				ids := readLines[[]uint32](t, filepath.Join(dir, name+".sids"))
				bad := 0
				for i, want := range ids {
					got := tok.Encode(nil, texts[i], true)
					if !slices.Equal(got, want) {
						bad++
						if bad <= 5 {
							t.Errorf("special text %d %q\n%s", i, texts[i], diffIDs(tok, got, want))
						}
					}
				}
				t.Logf("%s: ids with special tokens %d/%d", name, len(ids)-bad, len(ids))
			}
			if _, err := os.Stat(filepath.Join(dir, name+".pretok")); err == nil {
				pieces := readLines[[]string](t, filepath.Join(dir, name+".pretok"))
				bad := 0
				for i, want := range pieces {
					got := tok.PreTokenize(texts[i])
					if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
						bad++
						if bad <= 5 {
							t.Errorf("pretok %d %q\n\tgot  %q\n\twant %q", i, texts[i], got, want)
						}
					}
				}
				t.Logf("%s: pre-tokens %d/%d", name, len(pieces)-bad, len(pieces))
			}
		})
	}
}

func readLines[T any](t *testing.T, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, v)
	}
	return out
}

func splitList(s string) []string {
	var out []string
	for s != "" {
		var item string
		item, s, _ = cut(s, ",")
		if item != "" {
			out = append(out, item)
		}
	}
	return out
}

func cut(s, sep string) (string, string, bool) {
	for i := 0; i+len(sep) <= len(s); i++ {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return s, "", false
}
