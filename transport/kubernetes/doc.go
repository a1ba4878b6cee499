// Package kubernetes is the Kubernetes discovery source: it follows an
// InferencePool (inference.networking.k8s.io/v1, package inferencev1) and
// its pods with client-go informers, or a pool made from config without the
// CRD (llm-d's --endpoint-selector and --endpoint-target-ports), and passes
// the pool's endpoints on as llm-d's endpoint picker derives them (GIE
// pkg/epp/util/pod/pod.go, llm-d-router pkg/epp/datastore/datastore.go): a
// Ready pod with a pod IP and no deletion timestamp yields one endpoint per
// target port, <pod>-rank-<index>, narrowed by the llm-d.ai/active-ports
// annotation, with the pod's labels as replica labels.
//
// A Watcher owns its informers: Run starts them, and returns once they have
// stopped, when its context ends. Informer callbacks only signal its loop
// (a channel of capacity 1), which recomputes the endpoints from the
// informer's store, so bursts of pod updates coalesce. A list or watch that
// fails (RBAC, credentials, a missing CRD, an unreachable API) and an
// InferencePool that is missing or invalid are reported through the
// discovery.Reporter with their likely cause, once, and the last endpoints
// (and the last valid pool) stay. The watcher reads no config and makes no
// routing decision.
package kubernetes
