package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"
)

// parseYAML reads one YAML document into plain values: maps with string
// keys, []any, and the scalars YAML resolves to (string, bool, int, uint64,
// float64, nil).
//
// It parses into nodes and converts them itself rather than letting the
// library decode, because the library checks a mapping's keys for
// duplicates pairwise, which takes minutes on a mapping of a few hundred
// thousand keys. Here duplicates are found with a map, nesting is bounded
// by maxDepth, and the values produced, alias expansions included, by
// maxValues. A second document in the same input is an error rather than
// silently ignored.
func parseYAML(b []byte) (any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("yaml: the input must hold one document, found more")
	}
	var r yamlReader
	return r.value(&doc, 0)
}

type yamlReader struct {
	values int
}

func (r *yamlReader) value(n *yaml.Node, depth int) (any, error) {
	// Aliases count as a level, so an anchor that contains itself stops here.
	if depth > maxDepth {
		return nil, fmt.Errorf("yaml: line %d: nested more than %d levels deep", n.Line, maxDepth)
	}
	if r.values++; r.values > maxValues {
		return nil, fmt.Errorf("yaml: the document holds more than %d values, aliases expanded", maxValues)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return r.value(n.Content[0], depth)
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, fmt.Errorf("yaml: line %d: unknown anchor %q", n.Line, n.Value)
		}
		return r.value(n.Alias, depth+1)
	case yaml.ScalarNode:
		return scalarValue(n)
	case yaml.SequenceNode:
		out := make([]any, len(n.Content))
		for i, e := range n.Content {
			v, err := r.value(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case yaml.MappingNode:
		return r.mapping(n, depth)
	}
	return nil, fmt.Errorf("yaml: line %d: unexpected node", n.Line)
}

// mapping converts a mapping. Keys given explicitly win over merged ones
// (<<: *anchor), and of several merged mappings the earlier wins, as the
// YAML merge key spec says.
func (r *yamlReader) mapping(n *yaml.Node, depth int) (any, error) {
	out := make(map[string]any, len(n.Content)/2)
	lines := make(map[string]int, len(n.Content)/2)
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		if kn.Kind == yaml.ScalarNode && kn.Value == "<<" && kn.ShortTag() == "!!merge" {
			merges = append(merges, vn)
			continue
		}
		k := kn
		if k.Kind == yaml.AliasNode && k.Alias != nil {
			k = k.Alias
		}
		if k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("yaml: line %d: a mapping key must be a scalar", kn.Line)
		}
		if prev, dup := lines[k.Value]; dup {
			return nil, fmt.Errorf("yaml: line %d: key %q already set at line %d", kn.Line, k.Value, prev)
		}
		lines[k.Value] = kn.Line
		v, err := r.value(vn, depth+1)
		if err != nil {
			return nil, err
		}
		out[k.Value] = v
	}
	for _, m := range merges {
		sources := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			sources = m.Content
		}
		for _, src := range sources {
			target := src
			if target.Kind == yaml.AliasNode && target.Alias != nil {
				target = target.Alias
			}
			if target.Kind != yaml.MappingNode {
				return nil, fmt.Errorf("yaml: line %d: << must merge a mapping or a list of mappings", src.Line)
			}
			v, err := r.value(src, depth+1)
			if err != nil {
				return nil, err
			}
			for k, x := range v.(map[string]any) {
				if _, set := out[k]; !set {
					out[k] = x
				}
			}
		}
	}
	return out, nil
}

// scalarValue resolves a scalar as the library does (YAML 1.2 core schema:
// true, 1, 1.5, null, .inf, …), with strings taken directly.
func scalarValue(n *yaml.Node) (any, error) {
	switch n.ShortTag() {
	case "!!str", "!!timestamp":
		// A date stays a string, as the library leaves it when decoding
		// into an interface.
		return n.Value, nil
	case "!!null":
		return nil, nil
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}
