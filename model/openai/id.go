package openai

// Rand is the randomness RandomID needs. *math/rand/v2.Rand, rand.PCG and
// rand.ChaCha8 satisfy it; the caller owns it and its locking.
type Rand interface {
	Uint64() uint64
}

// RandomID returns a random 16-hex-digit id, the form vLLM's random_uuid()
// has had since PR #29375 ("Shorten unique ids to 16 hex chars"), e.g. the
// "a47c93077b0e387a" of the v0.26.0 capture.
func RandomID(r Rand) string {
	var b [16]byte
	return string(appendHex16(b[:0], r.Uint64()))
}

// AppendRandomID appends a RandomID to dst without allocating.
func AppendRandomID(dst []byte, r Rand) []byte {
	return appendHex16(dst, r.Uint64())
}

func appendHex16(dst []byte, v uint64) []byte {
	for shift := 60; shift >= 0; shift -= 4 {
		dst = append(dst, hexDigits[v>>uint(shift)&0xf])
	}
	return dst
}

// BaseRequestID picks the id a response id is built from, as vLLM's
// _base_request_id does: the X-Request-Id header when the request has one
// (even an empty one), else the body's request_id, else a fresh RandomID.
// hasHeader reports whether the header was present.
func BaseRequestID(header string, hasHeader bool, bodyID Opt[string], r Rand) string {
	switch {
	case hasHeader:
		return header
	case bodyID.Set:
		return bodyID.Value
	}
	return RandomID(r)
}

// ChatID is the chat response id for a base request id: "chatcmpl-" + base.
func ChatID(base string) string { return "chatcmpl-" + base }

// CompletionID is the text completion response id: "cmpl-" + base.
func CompletionID(base string) string { return "cmpl-" + base }

// PermissionID is a fresh model permission id: "modelperm-" + RandomID.
func PermissionID(r Rand) string { return "modelperm-" + RandomID(r) }

// Fingerprint is vLLM's default system_fingerprint (--fingerprint-mode full,
// vllm/entrypoints/openai/fingerprint.py @ 362c535e38f4) for a server
// without tensor, pipeline, data or expert parallelism:
// "vllm-<version>-<hash8>", where hash8 is the first 8 hex digits of the
// config hash (vLLM: vllm_config.compute_hash()). The simulator picks its
// own hash8, e.g. from its flags. Mode "none" is the empty fingerprint.
func Fingerprint(version, hash8 string) string {
	return "vllm-" + version + "-" + hash8
}
