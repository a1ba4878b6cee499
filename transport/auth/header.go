package auth

import (
	"bytes"
	"errors"

	"github.com/valyala/fasthttp"
)

// Why a request carries no usable credential. Neither says which keys
// exist.
var (
	// ErrMissing: no Authorization: Bearer and no x-api-key header.
	ErrMissing = errors.New("no API key")
	// ErrInvalid: a credential that is malformed, unknown, or two that
	// differ.
	ErrInvalid = errors.New("invalid API key")
)

// Header names a key may come in. fasthttp matches names in any case.
const (
	headerAuthorization = "Authorization"
	headerAPIKey        = "X-Api-Key"
)

// bearer returns the token of an Authorization value "Bearer TOKEN"
// (RFC 6750 §2.1): the scheme in any case, then one or more spaces or tabs,
// then a token with no whitespace in it; whitespace around the whole value
// is ignored. ok is false for another scheme or an empty token.
func bearer(v []byte) (token []byte, ok bool) {
	v = bytes.Trim(v, " \t")
	const scheme = "bearer"
	if len(v) <= len(scheme) || !bytes.EqualFold(v[:len(scheme)], []byte(scheme)) || (v[len(scheme)] != ' ' && v[len(scheme)] != '\t') {
		return nil, false
	}
	token = bytes.TrimLeft(v[len(scheme):], " \t")
	if len(token) == 0 || bytes.ContainsAny(token, " \t") {
		return nil, false
	}
	return token, true
}

// credential returns the one key a request presents, from every
// Authorization value (auths) and every x-api-key value (apiKeys). The same
// key may come in both, or repeated; two different ones, a non-Bearer
// Authorization or an empty x-api-key make it ErrInvalid, since guessing
// which one counts would let a proxy's header decide. allowAPIKey is false
// where only Authorization counts (the admin port).
func credential(auths, apiKeys [][]byte, allowAPIKey bool) ([]byte, error) {
	var key []byte
	take := func(k []byte) bool {
		if key != nil && !bytes.Equal(key, k) {
			return false
		}
		key = k
		return true
	}
	for _, v := range auths {
		t, ok := bearer(v)
		if !ok || !take(t) {
			return nil, ErrInvalid
		}
	}
	if allowAPIKey {
		for _, v := range apiKeys {
			t := bytes.Trim(v, " \t")
			if len(t) == 0 || bytes.ContainsAny(t, " \t") || !take(t) {
				return nil, ErrInvalid
			}
		}
	}
	if key == nil {
		return nil, ErrMissing
	}
	return key, nil
}

// requestCredential is credential over a request's headers. The returned
// key aliases the header: use it before the handler returns.
func requestCredential(h *fasthttp.RequestHeader, allowAPIKey bool) ([]byte, error) {
	// PeekAll reuses one buffer for its result: copy the first out (on the
	// stack, for up to four values) before the second call.
	var buf [4][]byte
	auths := append(buf[:0], h.PeekAll(headerAuthorization)...)
	var apiKeys [][]byte
	if allowAPIKey {
		apiKeys = h.PeekAll(headerAPIKey)
	}
	return credential(auths, apiKeys, allowAPIKey)
}
