package extproc

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/inferrail/inferrail/transport/extproc/protocol"
)

// hintMetadata is a metadata context holding v under ns/key.
func hintMetadata(ns, key string, v *structpb.Value) *corev3.Metadata {
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{ns: {Fields: map[string]*structpb.Value{key: v}}}}
}

// FuzzSubsetHint: a subset hint in either form, a comma string or a list
// of them, never panics, and yields trimmed endpoints without commas,
// bounded in number; the two forms agree.
func FuzzSubsetHint(f *testing.F) {
	for _, s := range []string{"", "10.0.0.1:8000", "10.0.0.1:8000,10.0.0.2:8000", " a , ,b ,", ",,,", "[::1]:80, 1.2.3.4:5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		str, ok := SubsetHint(hintMetadata(protocol.SubsetNamespace, protocol.SubsetKey, structpb.NewStringValue(s)))
		if !ok {
			t.Fatal("a string hint was not read")
		}
		parts := strings.Split(s, ",")
		vals := make([]*structpb.Value, len(parts))
		for i, p := range parts {
			vals[i] = structpb.NewStringValue(p)
		}
		list, ok := SubsetHint(hintMetadata(protocol.SubsetNamespace, protocol.SubsetKey, structpb.NewListValue(&structpb.ListValue{Values: vals})))
		if !ok {
			t.Fatal("a list hint was not read")
		}
		if len(str) > maxEndpoints || len(list) > maxEndpoints {
			t.Fatalf("%d and %d endpoints", len(str), len(list))
		}
		if len(str) < maxEndpoints && strings.Join(str, ",") != strings.Join(list, ",") {
			t.Fatalf("string form %q, list form %q", str, list)
		}
		for _, e := range str {
			if e == "" || strings.Contains(e, ",") || e != strings.TrimSpace(e) {
				t.Fatalf("endpoint %q", e)
			}
		}
	})
}

// FuzzServed: the served endpoint's metadata never panics; what it yields
// is the first endpoint of the value, trimmed.
func FuzzServed(f *testing.F) {
	for _, s := range []string{"", "10.0.0.1:8000", " 10.0.0.1:8000 ,10.0.0.2:1", ",x"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, asString bool) {
		v := structpb.NewStringValue(s)
		if !asString {
			v = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{v}})
		}
		ep, ok := Served(hintMetadata(protocol.LBNamespace, protocol.ServedKey, v))
		if !asString {
			if ok {
				t.Fatal("a list read as the served endpoint")
			}
			return
		}
		want := splitEndpoints(nil, s)
		if ok != (len(want) > 0) || ok && ep != want[0] {
			t.Fatalf("%q: %q %v", s, ep, ok)
		}
	})
}

// TestHintAbsent: no metadata, another namespace, or a value of another
// kind is no hint (every endpoint eligible), not an empty one.
func TestHintAbsent(t *testing.T) {
	if _, ok := SubsetHint(nil); ok {
		t.Fatal("nil metadata read as a hint")
	}
	if _, ok := SubsetHint(hintMetadata(protocol.LBNamespace, protocol.SubsetKey, structpb.NewStringValue("a:1"))); ok {
		t.Fatal("another namespace read as a hint")
	}
	if eps, ok := SubsetHint(hintMetadata(protocol.SubsetNamespace, protocol.SubsetKey, structpb.NewStringValue(""))); !ok || len(eps) != 0 {
		t.Fatalf("an empty hint: %v %v", eps, ok)
	}
}

// TestEndpoint: a replica URL as Envoy addresses it.
func TestEndpoint(t *testing.T) {
	f := func(url, want string) {
		t.Helper()
		if got := Endpoint(url); got != want {
			t.Fatalf("Endpoint(%q) = %q, want %q", url, got, want)
		}
	}
	f("http://10.0.0.7:8000", "10.0.0.7:8000")
	f("http://10.0.0.7", "10.0.0.7:80")
	f("https://10.0.0.7/v1", "10.0.0.7:443")
	f("http://[fd00::1]:8000", "[fd00::1]:8000")
	f("not a url", "")
}
