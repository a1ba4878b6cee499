package sched

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/inferrail/inferrail/model/policy"
)

var update = flag.Bool("update", false, "rewrite the generated parts of docs/plugins.md")

const docPath = "../../docs/plugins.md"

// The generated parts of docs/plugins.md sit between these markers.
const (
	beginRegistry = "<!-- BEGIN GENERATED: the registry (go test ./model/sched -run TestPluginsDoc -update) -->"
	endRegistry   = "<!-- END GENERATED: the registry -->"
	beginExample  = "<!-- BEGIN GENERATED: model/sched/freshload.go -->"
	endExample    = "<!-- END GENERATED: model/sched/freshload.go -->"
)

// TestPluginsDoc checks that docs/plugins.md lists every registered plugin
// type with its parameters and defaults, and every policy's profile, as
// the registry has them, and shows the worked example's source as it is
// in the tree; -update rewrites those parts.
func TestPluginsDoc(t *testing.T) {
	b, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("freshload.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	want := replace(t, doc, beginRegistry, endRegistry, registryDoc(t))
	want = replace(t, want, beginExample, endExample, "```go\n"+string(example)+"```\n")
	if want == doc {
		return
	}
	if *update {
		if err := os.WriteFile(docPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("docs/plugins.md differs from the registry: go test ./model/sched -run TestPluginsDoc -update")
}

// TestWorkedExampleIsOneLine checks the worked example's claim: the
// plugin is its file and one line of the registry.
func TestWorkedExampleIsOneLine(t *testing.T) {
	reg, err := os.ReadFile("registry.go")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(reg), "freshLoadFilter"); n != 1 {
		t.Fatalf("registry.go names freshLoadFilter %d times", n)
	}
	for _, f := range []string{"config.go", "builtin.go", "sched.go", "profile.go", "params.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "freshLoad") || strings.Contains(string(b), freshLoadFilter.Name) {
			t.Fatalf("%s names the worked example", f)
		}
	}
}

func replace(t *testing.T, doc, begin, end, body string) string {
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("docs/plugins.md has no %q … %q", begin, end)
	}
	return doc[:i+len(begin)] + "\n" + body + doc[j:]
}

var kindTitles = map[Kind]string{KindFilter: "Filters", KindScorer: "Scorers", KindPicker: "Pickers", KindHandler: "Profile handlers", KindProducer: "Data producers", KindFlow: "Flow control", KindAdmitter: "Admitters"}

// registryDoc renders every plugin type and every policy's profile.
func registryDoc(t *testing.T) string {
	var b strings.Builder
	kind := Kind(0)
	for _, typ := range Types() {
		if typ.Kind != kind {
			kind = typ.Kind
			fmt.Fprintf(&b, "\n### %s\n", kindTitles[kind])
		}
		origin := "llm-d's"
		if typ.Own {
			origin = "Inferrail's own"
		}
		fmt.Fprintf(&b, "\n#### `%s`\n\n%s\n\n", typ.Name, typ.Doc)
		fmt.Fprintf(&b, "*%s %s.", origin, typ.Kind)
		if typ.Signals != 0 {
			fmt.Fprintf(&b, " Routes on: %s.", strings.ReplaceAll(typ.Signals.String(), "+", ", "))
		}
		b.WriteString("*\n")
		if len(typ.Params) == 0 {
			b.WriteString("\nNo parameters.\n")
			continue
		}
		b.WriteString("\n| Parameter | Default | |\n|---|---|---|\n")
		paramRows(&b, "", typ.Params)
	}
	b.WriteString("\n### The policies as profiles\n\nEach policy name is the profile below, with the routing section's parameters in place of the defaults shown (`sched.New` builds it from the policy's spec).\n")
	for _, name := range Policies() {
		p, _ := Lookup(name)
		c, err := p.Config(policy.Spec{})
		if err != nil {
			t.Fatal(err)
		}
		var y strings.Builder
		enc := yaml.NewEncoder(&y)
		enc.SetIndent(2)
		if err := enc.Encode(c.Document()); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "\n#### `%s`\n\n%s Routes on: %s.\n\n```yaml\n%s```\n", name, p.Doc, orNothing(strings.ReplaceAll(c.Signals().String(), "+", ", ")), y.String())
	}
	return b.String()
}

func orNothing(s string) string {
	if s == "" {
		return "the gateway's own counts"
	}
	return s
}

func paramRows(b *strings.Builder, prefix string, params []Param) {
	for _, p := range params {
		switch {
		case p.Fields != nil:
			fmt.Fprintf(b, "| `%s%s` | | %s |\n", prefix, p.Name, p.Doc)
			paramRows(b, prefix+p.Name+".", p.Fields)
		case p.Elem != nil:
			fmt.Fprintf(b, "| `%s%s` | %s | %s |\n", prefix, p.Name, defaultText(p.Default), p.Doc)
			paramRows(b, prefix+p.Name+"[].", p.Elem)
		default:
			fmt.Fprintf(b, "| `%s%s` | %s | %s |\n", prefix, p.Name, defaultText(p.Default), p.Doc)
		}
	}
}

// defaultText renders a default as a document would write it.
func defaultText(v any) string {
	if v == nil {
		return "—"
	}
	return "`" + flowText(v) + "`"
}

func flowText(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case time.Duration:
		return x.String()
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = flowText(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + ": " + flowText(x[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v)
}
