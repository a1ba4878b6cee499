package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A config key is a promise to the operator: the docs say what it does, so
// some code must do it. These tests keep a key from being documented and
// not read (upstream.http2 once was), and a documented key from naming
// nothing.

// schemaKey is one leaf key of the schema: its path, list entries written
// [] (replicas[].url), and the Go field behind it (Replica.URL).
type schemaKey struct {
	path  string
	field string
}

// schemaKeys walks t's fields into the schema's leaf keys: every key whose
// value is not itself a section of keys.
func schemaKeys(path string, t reflect.Type) []schemaKey {
	t = deref(t)
	var out []schemaKey
	for name, f := range fieldsOf(t) {
		p := keyPath(path, name)
		ft := deref(f.Type)
		switch {
		case ft.Kind() == reflect.Struct && ft != durationType:
			out = append(out, schemaKeys(p, ft)...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out = append(out, schemaKeys(p+"[]", ft.Elem())...)
		default:
			out = append(out, schemaKey{path: p, field: t.Name() + "." + f.Name})
		}
	}
	slices.SortFunc(out, func(a, b schemaKey) int { return strings.Compare(a.path, b.path) })
	return out
}

// accessors are config's functions that read keys on a caller's behalf;
// their reads count as the caller's. The rest of the package reads every
// key to parse, check, diff or print it, which is no use of it.
var accessors = []string{"RoutingFor", "Model", "Profile", "For"}

// gatewayPackages are where the gateway's code lives, the module's
// packages that read its config (cmd/inferrail wires it); sim/ and bench/
// reading a key do not make the gateway honour it.
var gatewayPackages = []string{"./cmd/...", "./transport/...", "./actors/...", "./model/..."}

// listedPackage is what go list tells of one package.
type listedPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Export     string
	DepOnly    bool
}

// fieldReaders type-checks the packages of patterns (run from the module
// root, dir) and returns, for each field of a config struct that their
// non-test code reads ("Upstream.DialTimeout"), the packages that read it.
// A field only assigned to, or only named in a composite literal, is not
// read. Imports are read from the compiler's export data, which go list
// -export builds (from the build cache, once the tree is built).
func fieldReaders(t *testing.T, dir string, patterns ...string) map[string][]string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to list the packages with")
	}
	args := append([]string{"list", "-export", "-deps", "-json=ImportPath,Dir,GoFiles,Export,DepOnly"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listedPackage
	exports := map[string]string{}
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
		if !p.DepOnly {
			pkgs = append(pkgs, p)
		}
	}
	configPath := reflect.TypeFor[Config]().PkgPath()
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	})
	readers := map[string][]string{}
	viaAccessor := map[string][]string{} // accessor → the fields it reads
	called := map[string]bool{}          // accessors called outside config
	for _, p := range pkgs {
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		info := &types.Info{
			Selections: map[*ast.SelectorExpr]*types.Selection{},
			Types:      map[ast.Expr]types.TypeAndValue{},
			Uses:       map[*ast.Ident]types.Object{},
		}
		if _, err := (&types.Config{Importer: imp}).Check(p.ImportPath, fset, files, info); err != nil {
			t.Fatalf("type-check %s: %v", p.ImportPath, err)
		}
		inConfig := p.ImportPath == configPath
		if !inConfig {
			for _, obj := range info.Uses {
				if fn, ok := obj.(*types.Func); ok && fn.Pkg() != nil && fn.Pkg().Path() == configPath {
					called[fn.Name()] = true
				}
			}
		}
		for _, f := range files {
			for _, d := range f.Decls {
				read := func(k string) {
					if !slices.Contains(readers[k], p.ImportPath) {
						readers[k] = append(readers[k], p.ImportPath)
					}
				}
				if inConfig {
					fd, ok := d.(*ast.FuncDecl)
					if !ok || !slices.Contains(accessors, fd.Name.Name) {
						continue
					}
					read = func(k string) { viaAccessor[fd.Name.Name] = append(viaAccessor[fd.Name.Name], k) }
				}
				readsIn(d, info, configPath, read)
			}
		}
	}
	for name, fields := range viaAccessor {
		if !called[name] {
			continue // an accessor nobody calls reads nothing for anyone
		}
		for _, k := range fields {
			if !slices.Contains(readers[k], configPath) {
				readers[k] = append(readers[k], configPath)
			}
		}
	}
	return readers
}

// readsIn calls read with "Type.Field" for each field of a config struct
// (a type of package configPath) that d reads: a selector not assigned to,
// or a conversion to another struct type, such as cost.Model(cfg.CostModel),
// which reads every field.
func readsIn(d ast.Decl, info *types.Info, configPath string, read func(string)) {
	written := map[*ast.SelectorExpr]bool{}
	configStruct := func(t types.Type) (*types.Named, *types.Struct) {
		if ptr, ok := t.(*types.Pointer); ok {
			t = ptr.Elem()
		}
		named, ok := t.(*types.Named)
		if !ok || named.Obj().Pkg() == nil || named.Obj().Pkg().Path() != configPath {
			return nil, nil
		}
		st, _ := named.Underlying().(*types.Struct)
		return named, st
	}
	ast.Inspect(d, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			if n.Tok == token.ASSIGN {
				for _, l := range n.Lhs {
					if s, ok := l.(*ast.SelectorExpr); ok {
						written[s] = true
					}
				}
			}
		case *ast.SelectorExpr:
			s := info.Selections[n]
			if written[n] || s == nil || s.Kind() != types.FieldVal {
				break
			}
			if named, _ := configStruct(s.Recv()); named != nil {
				read(named.Obj().Name() + "." + s.Obj().Name())
			}
		case *ast.CallExpr:
			if len(n.Args) != 1 || !info.Types[n.Fun].IsType() {
				break
			}
			if _, isPtr := info.Types[n.Args[0]].Type.(*types.Pointer); isPtr {
				break // a pointer conversion reads nothing
			}
			if named, st := configStruct(info.Types[n.Args[0]].Type); st != nil {
				for i := range st.NumFields() {
					read(named.Obj().Name() + "." + st.Field(i).Name())
				}
			}
		}
		return true
	})
}

// TestKeysAreRead: every key of the schema is read by the gateway's code,
// not only parsed into its field. A key nobody reads does nothing; remove
// it (removedKeys gives it a hint) or make it work. Fields are told apart
// by their struct type, so keys that share one (routing.cost_model and
// models[].cost_model are both a CostModel) pass or fail together.
func TestKeysAreRead(t *testing.T) {
	readers := fieldReaders(t, "..", append([]string{"./config"}, gatewayPackages...)...)
	for _, k := range schemaKeys("", configType) {
		if len(readers[k.field]) == 0 {
			t.Errorf("%s (%s) is parsed but no gateway code reads it", k.path, k.field)
		}
	}
}

// TestRemovedKeys: a key that was removed is refused, from the file or the
// environment, as unknown, with its hint; and it is not in the schema.
func TestRemovedKeys(t *testing.T) {
	const base = "models: [{name: m}]\n"
	f := func(doc string, env []string, key, hint string) {
		t.Helper()
		_, err := Parse([]byte(doc), env)
		if got := keys(t, err); !slices.Equal(got, []string{key}) {
			t.Errorf("keys = %q, want [%q]; error: %v", got, key, err)
		}
		if !errors.Is(err, ErrUnknownKey) || !strings.HasPrefix(err.Error(), key) || !strings.Contains(err.Error(), hint) {
			t.Errorf("error %q: want %s refused as unknown, with %q", err, key, hint)
		}
	}
	replica := "replicas: [{id: r, url: 'http://h', models: [m]}]\n"
	f(base+replica+"upstream: {http2: false}\n", nil, "upstream.http2", "HTTP/1.1")
	f(base+replica, []string{"INFERRAIL_UPSTREAM__HTTP2=true"}, "upstream.http2", "delete the key")
	f(base+"replicas: [{id: r, url: 'http://h', models: [m]}, {id: s, url: 'http://s', models: [m], engine: auto}]\n",
		nil, "replicas[1].engine", "recognized by the metric prefix")
	f(base+"discovery: {dns: [{name: g, url: 'http://s', models: [m], engine: sglang}]}\n",
		nil, "discovery.dns[0].engine", "recognized by the metric prefix")

	schema := map[string]bool{}
	for _, k := range schemaKeys("", configType) {
		schema[k.path] = true
	}
	for key := range removedKeys {
		if schema[key] {
			t.Errorf("%s is in the schema and in removedKeys", key)
		}
	}
	for _, c := range [][2]string{{"a", "a"}, {"replicas[12].engine", "replicas[].engine"}, {"a[0].b[3]", "a[].b[]"}, {"a[", "a["}} {
		if got := schemaPath(c[0]); got != c[1] {
			t.Errorf("schemaPath(%q) = %q, want %q", c[0], got, c[1])
		}
	}
}

// keyMention finds what may be a key path in prose: dotted lower-case
// names, list indexes allowed (replicas[2].url).
var keyMention = regexp.MustCompile(`\b[a-z][a-z0-9_]*(\[[0-9]*\])?(\.[a-z][a-z0-9_]*(\[[0-9]*\])?)+\b`)

// listIndex is a list index or mark in a key path: [2], [].
var listIndex = regexp.MustCompile(`\[[0-9]*\]`)

// notKeys are mentions that look like key paths and are not: a file name.
var notKeys = []string{"tokenizer.json", "default.yaml", "replicas.svg", "slo.yaml"}

// docFiles are where keys are documented for the operator: the README and
// docs/ (their config reference and prose), the example and local configs
// (their comments; their keys are checked by parsing them), and the
// package doc.
var docFiles = []string{"../README.md", "../docs/*.md", "../deploy/*.yaml", "doc.go"}

// fieldOf returns the type of the key at a schema path (list marks
// included, as schemaKeys writes them).
func fieldOf(path string) reflect.Type {
	t := reflect.Type(configType)
	for _, part := range strings.Split(path, ".") {
		t = deref(t)
		if t.Kind() == reflect.Slice {
			t = deref(t.Elem())
		}
		t = fieldsOf(t)[strings.TrimSuffix(part, "[]")].Type
	}
	return t
}

// TestDocumentedKeysExist: every key path the docs mention is in the
// schema (a section or a key, in full, or its tail such as
// prefix_hash.blocks), so the docs never promise a key that is gone. A
// mention counts when it starts with the name of a section of the schema.
func TestDocumentedKeysExist(t *testing.T) {
	var paths []string // every section and key, without list marks
	sections := map[string]bool{}
	for _, k := range schemaKeys("", configType) {
		parts := strings.Split(strings.ReplaceAll(k.path, "[]", ""), ".")
		for i := range parts {
			p := strings.Join(parts[:i+1], ".")
			if !slices.Contains(paths, p) {
				paths = append(paths, p)
			}
			if i < len(parts)-1 {
				sections[parts[i]] = true
			}
		}
	}
	// free are the keys whose values are free-form (a map, a scheduling
	// profile): a mention of a path inside one names its value's keys.
	var free []string
	for _, k := range schemaKeys("", configType) {
		f := fieldOf(k.path)
		if f.Kind() == reflect.Map || f.Kind() == reflect.Interface {
			free = append(free, strings.ReplaceAll(k.path, "[]", ""))
		}
	}
	exists := func(mention string) bool {
		for _, p := range paths {
			if p == mention || strings.HasSuffix(p, "."+mention) {
				return true
			}
		}
		for _, p := range free {
			if strings.HasPrefix(mention, p+".") {
				return true
			}
		}
		return false
	}
	checked := 0
	for _, pattern := range docFiles {
		files, err := filepath.Glob(pattern)
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no files (%v)", pattern, err)
		}
		for _, name := range files {
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			for i, line := range strings.Split(string(b), "\n") {
				for _, m := range keyMention.FindAllString(line, -1) {
					m = listIndex.ReplaceAllString(m, "")
					first, _, _ := strings.Cut(m, ".")
					if !sections[first] || slices.Contains(notKeys, m) {
						continue
					}
					checked++
					if !exists(m) {
						t.Errorf("%s:%d mentions %s, which is no key of the schema", name, i+1, m)
					}
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d key mentions found in the docs: is the pattern still right?", checked)
	}
}
