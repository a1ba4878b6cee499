package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"

	"github.com/knadh/koanf/v2"

	"github.com/inferrail/inferrail/model/sched"
)

// MaxBytes is the size of the largest config document Load and Parse accept,
// and of the largest INFERRAIL_ value. A fleet of thousands of replicas fits
// in a fraction of it. The YAML library parses a whole document into nodes
// before anything can look at it, which for hostile input costs about 120 MB
// and a quarter of a second per MiB; PATCH /admin/config reaches Parse from
// the network, so the bound is kept small.
const MaxBytes = 1 << 20

// maxDepth bounds how deeply mappings and lists may nest. The schema needs
// five levels; the rest is room for chat_template_kwargs.
const maxDepth = 32

// maxValues bounds the values one document may hold, every alias expansion
// counted, so a small document cannot expand into a huge one ("billion
// laughs"), and a hostile one costs at most about a second. A config of ten
// thousand replicas holds about a hundred thousand values.
const maxValues = 1 << 17

// maxProblems bounds the problems one error reports; the rest are counted.
const maxProblems = 100

// EnvPrefix starts the name of every environment override.
const EnvPrefix = "INFERRAIL_"

// ErrUnknownKey is the error of a KeyError for a key the schema does not have.
var ErrUnknownKey = errors.New("unknown key")

// KeyError is one problem with one configuration key. Load, Parse and
// Validate return every problem at once, as errors.Join of *KeyError values
// (the first 100 of them, and a count of the rest).
type KeyError struct {
	// Key is the key's path, such as "replicas[2].url".
	Key string
	// Env is the environment variable that set the key, or "" for the file.
	Env string
	// Err says what is wrong.
	Err error
}

func (e *KeyError) Error() string {
	if e.Env != "" {
		return e.Key + " (" + e.Env + "): " + e.Err.Error()
	}
	return e.Key + ": " + e.Err.Error()
}

func (e *KeyError) Unwrap() error { return e.Err }

// Load reads the config file at path and returns Parse's result for it.
// Files over MaxBytes are rejected before they are parsed.
func Load(path string, env []string) (*Config, error) {
	b, err := readFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(b, env)
	if err != nil {
		if n := problemCount(err); n > 1 {
			return nil, fmt.Errorf("config %s: %d problems:\n%w", path, n, err)
		}
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// readFile reads the file at path, up to one byte past MaxBytes: the
// caller refuses a larger one before parsing it.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

// moreProblems ends a list of problems cut at maxProblems, counting the
// rest.
type moreProblems int

func (n moreProblems) Error() string { return fmt.Sprintf("and %d more problems", int(n)) }

// problemCount counts the problems in an error of Parse or Validate.
func problemCount(err error) int {
	n := 0
	for _, e := range unjoin(err) {
		if more, ok := e.(moreProblems); ok {
			n += int(more)
		} else {
			n++
		}
	}
	return n
}

// Parse builds a Config from a YAML (or JSON) document and environment
// entries in os.Environ's KEY=value form: the defaults, then the document,
// then every INFERRAIL_ entry, then Validate. Entries without the prefix are
// ignored; INFERRAIL_ entries that name no key are errors. A document that is
// not YAML, holds more than one document or is not a mapping is one plain
// error. Otherwise every problem is reported at once, as errors.Join of
// *KeyError values; past the first 100 the rest are only counted, in a last
// error "and N more problems".
func Parse(doc []byte, env []string) (*Config, error) {
	if len(doc) > MaxBytes {
		return nil, fmt.Errorf("config: document is larger than %d bytes", MaxBytes)
	}
	raw, err := parseYAML(doc)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	top, ok := toStringMap(raw)
	if raw != nil && !ok {
		return nil, fmt.Errorf("config: the document must be a mapping of sections, got %s", sched.Describe(raw))
	}

	autoCostModels(top)
	var ck checker
	file, _ := ck.value("", top, configType, 0)
	overrides := ck.environ(env)

	defaults, err := Default().Map()
	if err != nil {
		return nil, fmt.Errorf("BUG: config: defaults: %w", err)
	}
	k := koanf.New(".")
	merge := koanf.WithMergeFunc(func(src, dst map[string]any) error {
		mergeInto(src, dst, configType)
		return nil
	})
	fileMap, _ := file.(map[string]any)
	for _, layer := range []map[string]any{defaults, fileMap, overrides} {
		if len(layer) == 0 {
			// Each load copies what is loaded already: skip empty layers.
			continue
		}
		if err := k.Load(mapProvider(layer), nil, merge); err != nil {
			return nil, fmt.Errorf("BUG: config: merge: %w", err)
		}
	}
	c := new(Config)
	if err := k.UnmarshalWithConf("", c, koanf.UnmarshalConf{Tag: "koanf"}); err != nil {
		// Every value was checked against the schema above.
		return nil, fmt.Errorf("BUG: config: decode: %w", err)
	}
	// Lists are replaced whole, so the models list in effect is the last
	// layer's that has one.
	models := fileMap["models"]
	if m, ok := overrides["models"]; ok {
		models = m
	}
	inheritCostModels(c, models)
	normalize(reflect.ValueOf(c).Elem())

	// Problems with keys the checker rejected are reported once, by it.
	v := c.check(ck.covers, maxProblems-len(ck.errs))
	errs := append(ck.errs, v.errs...)
	if more := v.more + ck.more; more > 0 {
		errs = append(errs, moreProblems(more))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	c.install(v)
	return c, nil
}

// mapProvider hands an already parsed map to koanf.
type mapProvider map[string]any

func (p mapProvider) ReadBytes() ([]byte, error) {
	return nil, errors.New("config: mapProvider has no bytes")
}

func (p mapProvider) Read() (map[string]any, error) {
	if p == nil {
		return map[string]any{}, nil
	}
	return p, nil
}

// mergeInto lays src over dst: sections and nested settings merge key by
// key, while lists and maps of the schema (models, split,
// chat_template_kwargs, …) are replaced whole.
func mergeInto(src, dst map[string]any, t reflect.Type) {
	fields := fieldsOf(t)
	for key, sv := range src {
		f, ok := fields[key]
		sm, srcMap := sv.(map[string]any)
		dm, dstMap := dst[key].(map[string]any)
		if ok && srcMap && dstMap && isStruct(f.Type) {
			mergeInto(sm, dm, deref(f.Type))
			continue
		}
		dst[key] = sv
	}
}

// autoCostModels rewrites the scalar `cost_model: auto`, under routing and
// under each model, as the mapping it stands for, {auto: true}, before the
// document is checked against the schema. Other scalars are left for the
// checker to refuse.
func autoCostModels(top map[string]any) {
	rewrite := func(section any) any {
		m, ok := toStringMap(section)
		if !ok {
			return section
		}
		if s, ok := m["cost_model"].(string); ok && s == "auto" {
			m["cost_model"] = map[string]any{"auto": true}
		}
		return m
	}
	if r, ok := top["routing"]; ok {
		top["routing"] = rewrite(r)
	}
	if list, ok := top["models"].([]any); ok {
		for i, e := range list {
			list[i] = rewrite(e)
		}
	}
}

// inheritCostModels fills in the cost model keys a model leaves out from
// routing.cost_model. models is the merged models list, read to learn which
// keys each model set.
func inheritCostModels(c *Config, models any) {
	list, _ := models.([]any)
	for i := range c.Models {
		m := &c.Models[i]
		if m.CostModel == nil || i >= len(list) {
			continue
		}
		entry, _ := list[i].(map[string]any)
		set, _ := entry["cost_model"].(map[string]any)
		dst := reflect.ValueOf(m.CostModel).Elem()
		src := reflect.ValueOf(c.Routing.CostModel)
		for j := 0; j < dst.NumField(); j++ {
			if _, ok := set[tagOf(dst.Type().Field(j))]; !ok {
				dst.Field(j).Set(src.Field(j))
			}
		}
	}
}

// normalize makes empty lists and maps nil, so `split: {}` and no split
// are the same config. A model's shadow list and auth.public_paths are the
// exceptions: [] there means none, while leaving it out takes the default.
func normalize(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			normalize(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if v.Type() == modelType && f.Name == "Shadow" || v.Type() == authType && f.Name == "PublicPaths" ||
				!f.IsExported() {
				continue
			}
			normalize(v.Field(i))
		}
	case reflect.Slice:
		if v.Len() == 0 {
			v.SetZero()
			return
		}
		if v.Type().Elem().Kind() == reflect.Struct {
			for i := 0; i < v.Len(); i++ {
				normalize(v.Index(i))
			}
		}
	case reflect.Map:
		if v.Len() == 0 {
			v.SetZero()
		}
	}
}

// unjoin flattens an errors.Join result into its errors.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// schema helpers

var (
	configType   = reflect.TypeOf(Config{})
	durationType = reflect.TypeOf(Config{}.Server.RequestTimeout)
	modelType    = reflect.TypeOf(Model{})
	replicaType  = reflect.TypeOf(Replica{})
	dnsGroupType = reflect.TypeOf(DNSGroup{})
	authType     = reflect.TypeOf(Auth{})
)

func deref(t reflect.Type) reflect.Type {
	if t.Kind() == reflect.Pointer {
		return t.Elem()
	}
	return t
}

func isStruct(t reflect.Type) bool { return deref(t).Kind() == reflect.Struct }

func tagOf(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("koanf"), ",")
	return name
}

// fieldsOf maps a struct type's koanf keys to its fields.
func fieldsOf(t reflect.Type) map[string]reflect.StructField {
	t = deref(t)
	out := make(map[string]reflect.StructField, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if name := tagOf(f); name != "" && name != "-" {
			out[name] = f
		}
	}
	return out
}

// elementDefaults returns the defaults of a list entry of type t, as a map,
// or nil when its entries have none.
func elementDefaults(t reflect.Type) map[string]any {
	var v any
	switch t {
	case modelType:
		v = defaultModel()
	case replicaType:
		v = defaultReplica()
	case dnsGroupType:
		v = defaultDNSGroup()
	default:
		return nil
	}
	m, err := toMap(reflect.ValueOf(v))
	if err != nil {
		panic("BUG: config: element defaults: " + err.Error())
	}
	return m
}

// keyPath joins a key onto a path; index appends a list index.
func keyPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// sortedKeys returns a map's keys in order, so errors come out in a stable
// order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
