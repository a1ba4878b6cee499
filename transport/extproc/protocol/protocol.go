// Package protocol names the keys of the endpoint-picker protocol, for the
// picker (transport/extproc) and for the Envoy it talks to in tests
// (transport/extproc/envoytest): one definition for both sides.
package protocol

// The protocol's keys (GIE docs/proposals/004-endpoint-picker-protocol;
// llm-d-router pkg/epp/metadata/consts.go).
const (
	// DestinationHeader names the endpoints to forward to, best first,
	// ip:port[,ip:port…], as a request header and under LBNamespace.
	DestinationHeader = "x-gateway-destination-endpoint"
	// LBNamespace is the dynamic metadata namespace of the destination and
	// of the served endpoint.
	LBNamespace = "envoy.lb"
	// ServedKey is the endpoint that served the request, ip:port, in
	// LBNamespace of the response's metadata context.
	ServedKey = "x-gateway-destination-endpoint-served"
	// SubsetNamespace and SubsetKey are the subset hint: the only
	// endpoints the request may go to, a list of ip:port or one comma
	// string (as HeaderToMetadata rules make it).
	SubsetNamespace = "envoy.lb.subset_hint"
	SubsetKey       = "x-gateway-destination-endpoint-subset"
)
