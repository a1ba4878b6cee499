package auth

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// FuzzCredential checks the header parsing on any values: it never
// panics, a key it returns is one of the values' tokens, and a single
// well-formed header always yields its key.
func FuzzCredential(f *testing.F) {
	f.Add("Bearer abc", "", "", true)
	f.Add("bearer\tabc", "Bearer abc", "abc", true)
	f.Add("Basic Zm9vOmJhcg==", "", "", true)
	f.Add("", "", " k ", true)
	f.Add("Bearer a b", "", "", false)
	f.Add("BEARER  x", "", "y", true)
	f.Fuzz(func(t *testing.T, a1, a2, k string, allowAPIKey bool) {
		var auths, apiKeys [][]byte
		for _, a := range []string{a1, a2} {
			if a != "" {
				auths = append(auths, []byte(a))
			}
		}
		if k != "" {
			apiKeys = append(apiKeys, []byte(k))
		}
		key, err := credential(auths, apiKeys, allowAPIKey)
		if err != nil {
			if key != nil {
				t.Fatalf("a key with an error: %q", key)
			}
			return
		}
		if len(key) == 0 || bytes.ContainsAny(key, " \t") {
			t.Fatalf("key %q", key)
		}
		if !strings.Contains(a1+a2+k, string(key)) {
			t.Fatalf("key %q is in no header", key)
		}
		if tok, ok := bearer([]byte("Bearer " + string(key))); !ok || !bytes.Equal(tok, key) {
			t.Fatalf("Bearer %q does not parse back", key)
		}
	})
}

// FuzzClient sends any request head to a Guard holding keyA: it never
// panics, and accepts a request only if the key is in it.
func FuzzClient(f *testing.F) {
	f.Add("Authorization: Bearer " + keyA)
	f.Add("authorization: bearer " + keyA + "\r\nx-api-key: " + keyA)
	f.Add("X-Api-Key: " + keyA[:len(keyA)-1])
	f.Add("Authorization: Bearer " + keyA + "\r\nAuthorization: Bearer " + keyB)
	f.Add("Authorization:Bearer" + keyA)
	f.Add("x-api-key:\t" + keyA + "\t")
	fx := newFixture(f, twoKeys+strings.Repeat("ab", 32)+"\n", nil)
	f.Fuzz(func(t *testing.T, lines string) {
		raw := "POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + lines + "\r\n\r\n"
		var h fasthttp.RequestHeader
		if h.Read(bufio.NewReader(strings.NewReader(raw))) != nil {
			return
		}
		id, e := fx.g.Client(&h, []byte("/v1/completions"))
		if (id == nil) == (e == nil) {
			t.Fatalf("identity %v and error %v", id, e)
		}
		if id != nil && !strings.Contains(lines, keyA) && !strings.Contains(lines, keyInCfg) {
			t.Fatalf("accepted without a key: %q", lines)
		}
	})
}
