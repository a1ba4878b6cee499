package kubernetes

import (
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/transport/discovery"
	"github.com/inferrail/inferrail/transport/kubernetes/inferencev1"
)

// The pod annotations that narrow a pod's live target ports: a comma list
// of port numbers, such as "8000,8001" (llm-d-router
// pkg/epp/datastore/datastore.go). The first is llm-d's, the second the
// older GIE name, read when the first is absent.
const (
	ActivePortsAnnotation       = "llm-d.ai/active-ports"
	LegacyActivePortsAnnotation = "inference.networking.k8s.io/active-ports"
)

// Pool is the pool as the watcher follows it: which pods, on which ports.
// Immutable once built.
type Pool struct {
	Name      string
	Namespace string
	// Selector picks the pods by label; every entry must match.
	Selector map[string]string
	// TargetPorts are every pod's ports, each an endpoint of its own.
	TargetPorts []int32
	// AppProtocol is the InferencePool's spec.appProtocol; "" for http.
	AppProtocol inferencev1.AppProtocol
}

// poolOf returns the pool an InferencePool describes. p must be valid.
func poolOf(p *inferencev1.InferencePool) Pool {
	return Pool{Name: p.Name, Namespace: p.Namespace, Selector: maps.Clone(p.Spec.Selector.MatchLabels), TargetPorts: p.Spec.Ports(),
		AppProtocol: p.Spec.AppProtocol}
}

// Counts reports whether pod is one of the pool's live pods: its labels
// match the selector, it has a pod IP, its Ready condition is True and it
// has no deletion timestamp (GIE pkg/epp/util/pod/pod.go). A pod being
// deleted stops counting at once, though it may still answer while it
// drains.
func (p *Pool) Counts(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Status.PodIP == "" {
		return false
	}
	for k, v := range p.Selector {
		if got, ok := pod.Labels[k]; !ok || got != v {
			return false
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ActivePorts returns the ports a pod's annotations say are live, and
// whether it has such an annotation. Entries that are not port numbers
// are skipped, so an annotation that names none leaves no port live.
func ActivePorts(annotations map[string]string) (map[int32]bool, bool) {
	v, ok := annotations[ActivePortsAnnotation]
	if !ok {
		v, ok = annotations[LegacyActivePortsAnnotation]
	}
	if !ok {
		return nil, false
	}
	out := make(map[int32]bool)
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err == nil && n >= 1 && n <= 65535 {
			out[int32(n)] = true
		}
	}
	return out, true
}

// Endpoints returns the pool's endpoints among pods: for each pod that
// counts, in name order, one endpoint per target port its annotations
// leave live, named <pod>-rank-<index of the port in targetPorts>, at the
// pod IP, with the pod's labels.
func (p *Pool) Endpoints(pods []*corev1.Pod, tmpl *discovery.Template) []fleet.Endpoint {
	pods = slices.Clone(pods)
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	var out []fleet.Endpoint
	for _, pod := range pods {
		if !p.Counts(pod) {
			continue
		}
		addr, err := netip.ParseAddr(pod.Status.PodIP)
		if err != nil {
			continue
		}
		active, narrowed := ActivePorts(pod.Annotations)
		for idx, port := range p.TargetPorts {
			if narrowed && !active[port] {
				continue
			}
			out = append(out, tmpl.Endpoint(pod.Name+"-rank-"+strconv.Itoa(idx), addr.Unmap(), int(port), idx, maps.Clone(pod.Labels)))
		}
	}
	return out
}
