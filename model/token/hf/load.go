package hf

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// fileJSON is the top level of tokenizer.json.
type fileJSON struct {
	AddedTokens   []addedToken    `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	Model         json.RawMessage `json:"model"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
}

// component is any normalizer, pre-tokenizer, post-processor or decoder: the union
// of their fields.
type component struct {
	Type string `json:"type"`

	Normalizers   []json.RawMessage `json:"normalizers"`
	Pretokenizers []json.RawMessage `json:"pretokenizers"`
	Processors    []json.RawMessage `json:"processors"`
	Decoders      []json.RawMessage `json:"decoders"`

	StripLeft          *bool        `json:"strip_left"`
	StripRight         *bool        `json:"strip_right"`
	Pattern            *patternJSON `json:"pattern"`
	Content            string       `json:"content"`
	Prepend            string       `json:"prepend"`
	CleanText          *bool        `json:"clean_text"`
	HandleChineseChars *bool        `json:"handle_chinese_chars"`
	StripAccents       *bool        `json:"strip_accents"`
	Lowercase          *bool        `json:"lowercase"`

	Behavior         string `json:"behavior"`
	Invert           bool   `json:"invert"`
	AddPrefixSpace   *bool  `json:"add_prefix_space"`
	UseRegex         *bool  `json:"use_regex"`
	Replacement      string `json:"replacement"`
	PrependScheme    string `json:"prepend_scheme"`
	Split            *bool  `json:"split"`
	IndividualDigits bool   `json:"individual_digits"`
	Delimiter        string `json:"delimiter"`

	Single        []templatePiece            `json:"single"`
	SpecialTokens map[string]templateSpecial `json:"special_tokens"`
	Sep           []json.RawMessage          `json:"sep"`
	Cls           []json.RawMessage          `json:"cls"`

	Start   int    `json:"start"`
	Stop    int    `json:"stop"`
	Prefix  string `json:"prefix"`
	Cleanup *bool  `json:"cleanup"`
	Suffix  string `json:"suffix"`
}

type patternJSON struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

type templatePiece struct {
	SpecialToken *struct {
		ID string `json:"id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID string `json:"id"`
	} `json:"Sequence"`
}

type templateSpecial struct {
	ID  string   `json:"id"`
	IDs []uint32 `json:"ids"`
}

// Load builds a Tokenizer from the bytes of tokenizer.json and, optionally,
// tokenizer_config.json (nil if absent), which supplies bos/eos/pad/unk names and
// split_special_tokens. Components the Rust library supports but this package does
// not (other models than BPE, Precompiled and other rare normalizers, BPE dropout)
// are reported as errors rather than encoded approximately.
func Load(tokenizerJSON, tokenizerConfigJSON []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(tokenizerJSON, &f); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	t := &Tokenizer{}
	var errs []error
	var err error
	if t.norm, err = buildNormalizer(f.Normalizer); err != nil {
		errs = append(errs, fmt.Errorf("normalizer: %w", err))
	}
	if t.stages, err = buildPreTokenizer(f.PreTokenizer); err != nil {
		errs = append(errs, fmt.Errorf("pre_tokenizer: %w", err))
	}
	if t.decoder, err = buildDecoder(f.Decoder); err != nil {
		errs = append(errs, fmt.Errorf("decoder: %w", err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// Raw-byte mode: when the last stage maps bytes to ByteLevel runes, drop it and
	// let the model read the bytes directly.
	raw := false
	if n := len(t.stages); n > 0 && t.stages[n-1].kind == stByteMap {
		t.stages = t.stages[:n-1]
		raw = true
	}
	var mc bpeConfig
	if len(f.Model) == 0 || string(f.Model) == "null" {
		return nil, errors.New("model: missing")
	}
	if err := json.Unmarshal(f.Model, &mc); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if mc.Type == "" && mc.Merges == nil {
		// The Rust library reads an untyped model as the first variant whose
		// fields fit; without merges that is WordPiece, WordLevel or Unigram
		// (bert-base-uncased's tokenizer.json has no "type").
		return nil, errors.New("model: untyped model without merges (WordPiece, WordLevel or Unigram) is not supported (only BPE)")
	}
	if mc.Type != "BPE" && mc.Type != "" {
		return nil, fmt.Errorf("model: type %q is not supported (only BPE)", mc.Type)
	}
	if t.model, err = newBPE(&mc, raw); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if len(t.stages) == 0 && t.model.prefix == "" {
		t.model.buildBigrams() // words are whole segments: see bpe.bigrams
	}
	if err := t.buildAdded(f.AddedTokens); err != nil {
		return nil, fmt.Errorf("added_tokens: %w", err)
	}
	if t.specialPrefix, t.specialSuffix, err = buildPostProcessor(f.PostProcessor, t); err != nil {
		return nil, fmt.Errorf("post_processor: %w", err)
	}
	if len(tokenizerConfigJSON) > 0 {
		if err := t.applyConfig(tokenizerConfigJSON); err != nil {
			return nil, fmt.Errorf("tokenizer_config.json: %w", err)
		}
	}
	return t, nil
}

// LoadDir loads tokenizer.json and, when present, tokenizer_config.json from dir
// in fsys (os.DirFS for a model directory).
func LoadDir(fsys fs.FS, dir string) (*Tokenizer, error) {
	tj, err := fs.ReadFile(fsys, path.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, err
	}
	cj, err := fs.ReadFile(fsys, path.Join(dir, "tokenizer_config.json"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return Load(tj, cj)
}

func isNull(b json.RawMessage) bool { return len(b) == 0 || string(b) == "null" }

func buildNormalizer(b json.RawMessage) (normalizer, error) {
	if isNull(b) {
		return nil, nil
	}
	var c component
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	switch c.Type {
	case "Sequence":
		var q normSequence
		for i, sub := range c.Normalizers {
			n, err := buildNormalizer(sub)
			if err != nil {
				return nil, fmt.Errorf("normalizers[%d]: %w", i, err)
			}
			if n != nil {
				q = append(q, n)
			}
		}
		return q, nil
	case "NFC":
		return unicodeForm{f: norm.NFC}, nil
	case "NFD":
		return unicodeForm{f: norm.NFD, keep: keepNFD}, nil
	case "NFKC":
		return unicodeForm{f: norm.NFKC, keep: keepNFKC}, nil
	case "NFKD":
		return unicodeForm{f: norm.NFKD, keep: keepNFKD}, nil
	case "Lowercase":
		return lowercase{}, nil
	case "Strip":
		return strip{left: boolOr(c.StripLeft, true), right: boolOr(c.StripRight, true)}, nil
	case "StripAccents":
		return stripAccents{}, nil
	case "Replace":
		m, err := buildPattern(c.Pattern)
		if err != nil {
			return nil, err
		}
		return replace{m: m, content: c.Content}, nil
	case "Prepend":
		return prepend(c.Prepend), nil
	case "ByteLevel":
		return byteLevelNorm{}, nil
	case "BertNormalizer":
		lower := boolOr(c.Lowercase, true)
		return bertNorm{
			cleanText: boolOr(c.CleanText, true),
			chinese:   boolOr(c.HandleChineseChars, true),
			accents:   boolOr(c.StripAccents, lower),
			lower:     lower,
		}, nil
	}
	return nil, fmt.Errorf("type %q is not supported", c.Type)
}

func boolOr(p *bool, d bool) bool {
	if p == nil {
		return d
	}
	return *p
}

// buildPattern compiles a Split/Replace pattern: a literal, a regex with a
// hand-written scanner, or any other regex on regexp2.
func buildPattern(p *patternJSON) (matcher, error) {
	switch {
	case p == nil:
		return nil, errors.New("missing pattern")
	case p.String != nil:
		return literal(*p.String), nil
	case p.Regex != nil:
		if sc, ok := scannerFor(*p.Regex); ok {
			return sc, nil
		}
		return compileRegex(*p.Regex)
	}
	return nil, errors.New("pattern is neither String nor Regex")
}

func buildPreTokenizer(b json.RawMessage) ([]stage, error) {
	if isNull(b) {
		return nil, nil
	}
	var c component
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	switch c.Type {
	case "Sequence":
		var out []stage
		for i, sub := range c.Pretokenizers {
			st, err := buildPreTokenizer(sub)
			if err != nil {
				return nil, fmt.Errorf("pretokenizers[%d]: %w", i, err)
			}
			out = append(out, st...)
		}
		return out, nil
	case "Split":
		m, err := buildPattern(c.Pattern)
		if err != nil {
			return nil, err
		}
		beh, err := parseBehavior(c.Behavior)
		if err != nil {
			return nil, err
		}
		if sc, ok := m.(*scanner); ok && beh == isolated && !c.Invert {
			return []stage{{kind: stScan, sc: sc}}, nil
		}
		return []stage{{kind: stSplit, m: m, beh: beh, invert: c.Invert}}, nil
	case "ByteLevel":
		var out []stage
		if boolOr(c.AddPrefixSpace, true) {
			out = append(out, stage{kind: stPrefixSpace})
		}
		if boolOr(c.UseRegex, true) {
			sc, _ := scannerFor(patGPT2)
			out = append(out, stage{kind: stScan, sc: sc})
		}
		return append(out, stage{kind: stByteMap}), nil
	case "Metaspace":
		repl := c.Replacement
		if utf8.RuneCountInString(repl) != 1 {
			return nil, fmt.Errorf("metaspace replacement %q is not one character", repl)
		}
		st := stage{kind: stMetaspace, repl: repl, msSplit: boolOr(c.Split, true)}
		switch c.PrependScheme {
		case "always":
			st.scheme = prependAlways
		case "first":
			st.scheme = prependFirst
		case "never":
			st.scheme = prependNever
		case "":
			// Older files: add_prefix_space true means always.
			if !boolOr(c.AddPrefixSpace, true) {
				st.scheme = prependNever
			}
		default:
			return nil, fmt.Errorf("metaspace prepend_scheme %q", c.PrependScheme)
		}
		return []stage{st}, nil
	case "Digits":
		beh := contiguous
		if c.IndividualDigits {
			beh = isolated
		}
		return []stage{{kind: stSplit, m: runeClass(isNumeric), beh: beh}}, nil
	case "Whitespace":
		return []stage{{kind: stSplit, m: wordRuns{}, beh: removed, invert: true}}, nil
	case "WhitespaceSplit":
		return []stage{whitespaceSplit()}, nil
	case "Punctuation":
		beh, err := parseBehavior(c.Behavior)
		if err != nil {
			return nil, err
		}
		return []stage{{kind: stSplit, m: runeClass(isPunc), beh: beh}}, nil
	case "BertPreTokenizer":
		return []stage{whitespaceSplit(), {kind: stSplit, m: runeClass(isPunc), beh: isolated}}, nil
	case "CharDelimiterSplit":
		d, n := utf8.DecodeRuneInString(c.Delimiter)
		if n == 0 || n != len(c.Delimiter) {
			return nil, fmt.Errorf("delimiter %q is not one character", c.Delimiter)
		}
		return []stage{{kind: stSplit, m: runeClass(func(r rune) bool { return r == d }), beh: removed}}, nil
	}
	return nil, fmt.Errorf("type %q is not supported", c.Type)
}

func buildDecoder(b json.RawMessage) (decoder, error) {
	if isNull(b) {
		return nil, nil
	}
	var c component
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	switch c.Type {
	case "Sequence":
		var q decSequence
		for i, sub := range c.Decoders {
			d, err := buildDecoder(sub)
			if err != nil {
				return nil, fmt.Errorf("decoders[%d]: %w", i, err)
			}
			if d != nil {
				q = append(q, d)
			}
		}
		return q, nil
	case "ByteLevel":
		return decByteLevel{}, nil
	case "Replace":
		m, err := buildPattern(c.Pattern)
		if err != nil {
			return nil, err
		}
		return decReplace{m: m, content: c.Content}, nil
	case "ByteFallback":
		return decByteFallback{}, nil
	case "Fuse":
		return decFuse{}, nil
	case "Strip":
		return decStrip{content: c.Content, start: c.Start, stop: c.Stop}, nil
	case "Metaspace":
		d := decMetaspace{repl: c.Replacement}
		if c.PrependScheme == "never" || (c.PrependScheme == "" && !boolOr(c.AddPrefixSpace, true)) {
			d.scheme = prependNever
		}
		return d, nil
	case "WordPiece":
		p := c.Prefix
		if p == "" {
			p = "##"
		}
		return decWordPiece{prefix: p, cleanup: boolOr(c.Cleanup, true)}, nil
	case "BPEDecoder":
		s := c.Suffix
		if s == "" {
			s = "</w>"
		}
		return decBPE{suffix: s}, nil
	}
	return nil, fmt.Errorf("type %q is not supported", c.Type)
}

// buildPostProcessor returns the ids a post-processor adds before and after a
// single sequence when special tokens are requested.
func buildPostProcessor(b json.RawMessage, t *Tokenizer) (pre, suf []uint32, err error) {
	if isNull(b) {
		return nil, nil, nil
	}
	var c component
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, nil, err
	}
	switch c.Type {
	case "Sequence":
		for i, sub := range c.Processors {
			p, s, err := buildPostProcessor(sub, t)
			if err != nil {
				return nil, nil, fmt.Errorf("processors[%d]: %w", i, err)
			}
			pre = append(append([]uint32(nil), p...), pre...)
			suf = append(suf, s...)
		}
		return pre, suf, nil
	case "ByteLevel":
		return nil, nil, nil // offsets only
	case "TemplateProcessing":
		seen := false
		for _, p := range c.Single {
			switch {
			case p.Sequence != nil:
				seen = true
			case p.SpecialToken != nil:
				st, ok := c.SpecialTokens[p.SpecialToken.ID]
				if !ok {
					return nil, nil, fmt.Errorf("special token %q missing from special_tokens", p.SpecialToken.ID)
				}
				if seen {
					suf = append(suf, st.IDs...)
				} else {
					pre = append(pre, st.IDs...)
				}
			}
		}
		return pre, suf, nil
	case "RobertaProcessing", "BertProcessing":
		cls, err := tokenPairID(c.Cls)
		if err != nil {
			return nil, nil, fmt.Errorf("cls: %w", err)
		}
		sep, err := tokenPairID(c.Sep)
		if err != nil {
			return nil, nil, fmt.Errorf("sep: %w", err)
		}
		return []uint32{cls}, []uint32{sep}, nil
	}
	return nil, nil, fmt.Errorf("type %q is not supported", c.Type)
}

// tokenPairID reads the id of a ["token", id] pair.
func tokenPairID(p []json.RawMessage) (uint32, error) {
	if len(p) != 2 {
		return 0, errors.New("want [token, id]")
	}
	var id uint32
	if err := json.Unmarshal(p[1], &id); err != nil {
		return 0, err
	}
	return id, nil
}

// buildAdded registers added_tokens as the Rust deserializer does (add_tokens):
// ids come from the model vocabulary when the content is there, else the next free
// id; then the two matching sets are built, special tokens first.
func (t *Tokenizer) buildAdded(list []addedToken) error {
	t.addedByID = make(map[uint32]*addedToken)
	t.addedByContent = make(map[string]uint32)
	var special, classic []*addedToken
	specialSet := map[string]bool{}
	for i := range list {
		tok := list[i]
		if tok.Special && tok.Content != "" && !specialSet[tok.Content] {
			specialSet[tok.Content] = true
		}
	}
	modelSize := uint32(t.model.size)
	var maxID uint32
	haveMax := false
	for i := range list {
		tok := list[i]
		if tok.Content == "" {
			continue
		}
		dup := false
		for _, old := range t.addedByID {
			if *old == tok {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		id, ok := t.addedByContent[tok.Content]
		if !ok {
			id, ok = t.model.vocab[tok.Content]
		}
		if !ok {
			switch {
			case !haveMax:
				id = modelSize
			case maxID >= modelSize || modelSize == 0:
				id = maxID + 1
			default:
				id = modelSize
			}
		}
		tok.ID = id
		p := &tok
		t.addedByContent[tok.Content] = id
		t.addedByID[id] = p
		if !haveMax || id > maxID {
			maxID, haveMax = id, true
		}
		if specialSet[tok.Content] {
			special = append(special, p)
		} else {
			classic = append(classic, p)
		}
	}
	var rawToks, normToks []*addedToken
	var rawPats, normPats []string
	for _, p := range append(special, classic...) {
		if p.Normalized {
			pat := p.Content
			if t.norm != nil {
				pat = t.norm.normalize(pat)
			}
			normToks, normPats = append(normToks, p), append(normPats, pat)
		} else {
			rawToks, rawPats = append(rawToks, p), append(rawPats, p.Content)
		}
	}
	t.added = newAddedSet(rawToks, rawPats)
	t.addedNorm = newAddedSet(normToks, normPats)
	t.vocabSize = t.model.size
	for c := range t.addedByContent {
		if _, ok := t.model.vocab[c]; !ok {
			t.vocabSize++
		}
	}
	return nil
}

// applyConfig reads the special token names and split_special_tokens from
// tokenizer_config.json. A token can be a string or an AddedToken object.
func (t *Tokenizer) applyConfig(b []byte) error {
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(b, &cfg); err != nil {
		return err
	}
	if v, ok := cfg["split_special_tokens"]; ok {
		_ = json.Unmarshal(v, &t.splitSpecial)
	}
	if v, ok := cfg["clean_up_tokenization_spaces"]; ok && !isNull(v) {
		t.cleanUpSet = json.Unmarshal(v, &t.cleanUp) == nil
	}
	t.specials = map[string]SpecialToken{}
	for _, name := range []string{"bos_token", "eos_token", "pad_token", "unk_token"} {
		v, ok := cfg[name]
		if !ok || isNull(v) {
			continue
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			var obj struct {
				Content string `json:"content"`
			}
			if err := json.Unmarshal(v, &obj); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			s = obj.Content
		}
		if id, ok := t.TokenID(s); ok {
			t.specials[name] = SpecialToken{Content: s, ID: id}
		}
	}
	return nil
}
