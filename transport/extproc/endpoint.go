package extproc

import (
	"net"
	"net/url"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/inferrail/inferrail/transport/extproc/protocol"
)

// maxEndpoints bounds the endpoints read from one hint: more than any
// pool holds, so that a hostile hint costs little.
const maxEndpoints = 4096

// Endpoint is a replica's base URL as Envoy addresses it: host:port, the
// scheme's port when the URL has none. It returns "" for a URL that is not
// one.
func Endpoint(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return ""
	}
	if u.Port() != "" {
		return u.Host
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// SubsetHint reads the subset hint from a metadata context. ok is false
// when there is none: every endpoint is eligible. A hint that is present
// but names nothing (an empty list or string) is ok with no endpoints:
// nothing is eligible.
func SubsetHint(md *corev3.Metadata) (eps []string, ok bool) {
	v, ok := field(md, protocol.SubsetNamespace, protocol.SubsetKey)
	if !ok {
		return nil, false
	}
	switch k := v.Kind.(type) {
	case *structpb.Value_StringValue:
		eps = splitEndpoints(eps, k.StringValue)
	case *structpb.Value_ListValue:
		for _, e := range k.ListValue.GetValues() {
			if s, isStr := e.Kind.(*structpb.Value_StringValue); isStr {
				eps = splitEndpoints(eps, s.StringValue)
			}
			if len(eps) >= maxEndpoints {
				break
			}
		}
	}
	return eps, true
}

// Served reads the endpoint that served the request from a response's
// metadata context: the first of a list, as Envoy writes one address.
func Served(md *corev3.Metadata) (string, bool) {
	v, ok := field(md, protocol.LBNamespace, protocol.ServedKey)
	if !ok {
		return "", false
	}
	s, isStr := v.Kind.(*structpb.Value_StringValue)
	if !isStr {
		return "", false
	}
	eps := splitEndpoints(nil, s.StringValue)
	if len(eps) == 0 {
		return "", false
	}
	return eps[0], true
}

func field(md *corev3.Metadata, ns, key string) (*structpb.Value, bool) {
	st := md.GetFilterMetadata()[ns]
	if st == nil {
		return nil, false
	}
	v, ok := st.GetFields()[key]
	return v, ok && v != nil
}

// splitEndpoints appends the comma-separated endpoints of s to dst,
// trimmed, empty ones dropped, at most maxEndpoints in all.
func splitEndpoints(dst []string, s string) []string {
	for s != "" && len(dst) < maxEndpoints {
		var e string
		e, s, _ = strings.Cut(s, ",")
		if e = strings.TrimSpace(e); e != "" {
			dst = append(dst, e)
		}
	}
	return dst
}
