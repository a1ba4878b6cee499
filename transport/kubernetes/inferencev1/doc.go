// Package inferencev1 holds the Gateway API Inference Extension's
// InferencePool, version inference.networking.k8s.io/v1, as Go types: what
// the Kubernetes discovery watches and what the Helm chart renders.
//
// The GIE module (sigs.k8s.io/gateway-api-inference-extension) is not served
// by the module proxy this project builds from, so the types are written
// here from the published API: the same group, version, kind, JSON field
// names and limits. Validate checks the limits the CRD's schema enforces,
// so a pool that the API server would refuse is refused here too.
package inferencev1
