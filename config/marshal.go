package config

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Map returns the config as nested maps and lists keyed as in the file, with
// durations as strings ("250ms"), ready for JSON (GET /admin/config) or a
// JSON merge patch. Unset optional keys (a model's policy, split, shadow,
// cost_model, …) are left out. Parse of its JSON or YAML gives back an equal
// Config. The result is fresh and belongs to the caller.
func (c *Config) Map() (map[string]any, error) {
	return toMap(reflect.ValueOf(c).Elem())
}

// YAML returns the config as one YAML document, sections and keys in the
// order of the Config types. Parse gives back an equal Config.
func (c *Config) YAML() ([]byte, error) {
	n, err := toNode(reflect.ValueOf(c).Elem())
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, fmt.Errorf("config: encode yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: encode yaml: %w", err)
	}
	return []byte(b.String()), nil
}

func toMap(v reflect.Value) (map[string]any, error) {
	n, err := toNode(v)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := n.Decode(&m); err != nil {
		return nil, fmt.Errorf("config: decode own yaml: %w", err)
	}
	return m, nil
}

// toNode builds the YAML node of a value of the schema. Every scalar gets
// an explicit tag, so a string such as "true" stays a string and a float
// such as 1.0 stays a float when read back.
func toNode(v reflect.Value) (*yaml.Node, error) {
	if v.Type() == durationType {
		return scalar("!!str", formatDuration(time.Duration(v.Int()))), nil
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return scalar("!!null", "null"), nil
		}
		return toNode(v.Elem())
	case reflect.Struct:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			name := tagOf(t.Field(i))
			fv := v.Field(i)
			if name == "" || name == "-" || isUnset(fv) {
				continue
			}
			vn, err := toNode(fv)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, scalar("!!str", name), vn)
		}
		return n, nil
	case reflect.Map:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		for _, k := range keys {
			vn, err := toNode(v.MapIndex(k))
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, scalar("!!str", k.String()), vn)
		}
		return n, nil
	case reflect.Slice:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for i := 0; i < v.Len(); i++ {
			en, err := toNode(v.Index(i))
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, en)
		}
		return n, nil
	case reflect.String:
		return scalar("!!str", v.String()), nil
	case reflect.Bool:
		return scalar("!!bool", strconv.FormatBool(v.Bool())), nil
	case reflect.Int, reflect.Int64:
		return scalar("!!int", strconv.FormatInt(v.Int(), 10)), nil
	case reflect.Uint64:
		return scalar("!!int", strconv.FormatUint(v.Uint(), 10)), nil
	case reflect.Float64:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("config: cannot write the non-finite number %v", f)
		}
		s := strconv.FormatFloat(f, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eE") {
			s += ".0"
		}
		return scalar("!!float", s), nil
	}
	return nil, fmt.Errorf("config: cannot write a value of type %s", v.Type())
}

// isUnset reports whether a struct field is left out of the output: nil
// pointers, lists and maps, which Parse leaves nil when absent.
func isUnset(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// formatDuration writes a duration as time.Duration.String does, without
// its trailing zero units: "5m" rather than "5m0s".
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

func scalar(tag, value string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value}
}
