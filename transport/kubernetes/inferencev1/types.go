package inferencev1

import (
	"fmt"
	"regexp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The API's coordinates.
const (
	Group    = "inference.networking.k8s.io"
	Version  = "v1"
	Kind     = "InferencePool"
	ListKind = "InferencePoolList"
	Resource = "inferencepools"
)

// GroupVersionResource is what a dynamic client watches.
var GroupVersionResource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}

// GroupVersionKind names one pool object.
var GroupVersionKind = schema.GroupVersionKind{Group: Group, Version: Version, Kind: Kind}

// InferencePool is a set of model-server pods behind one endpoint picker.
type InferencePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   InferencePoolSpec   `json:"spec"`
	Status InferencePoolStatus `json:"status,omitempty"`
}

// InferencePoolList is a list of pools, as the API server lists them.
type InferencePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InferencePool `json:"items"`
}

// InferencePoolSpec says which pods belong to the pool, on which ports
// they serve, and which endpoint picker chooses among them.
type InferencePoolSpec struct {
	// Selector matches the pool's pods by label, in the pool's namespace.
	Selector LabelSelector `json:"selector"`
	// TargetPorts are the ports every pod serves on; each port of each pod
	// is an endpoint of its own (podIP:port), which is how data-parallel
	// ranks are exposed. 1 to 8, unique.
	TargetPorts []Port `json:"targetPorts"`
	// AppProtocol is the protocol of every target port: "http" (the
	// default) or "kubernetes.io/h2c".
	AppProtocol AppProtocol `json:"appProtocol,omitempty"`
	// EndpointPickerRef names the endpoint picker's Service. Optional in
	// the API since GIE v1.5; most gateways still need it.
	EndpointPickerRef *EndpointPickerRef `json:"endpointPickerRef,omitempty"`
}

// LabelSelector is matchLabels only, so that it can become a Service
// selector: every entry must match (AND).
type LabelSelector struct {
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

// Port is one port number.
type Port struct {
	Number int32 `json:"number"`
}

// AppProtocol is the application protocol of a pool's ports.
type AppProtocol string

// The protocols the API allows.
const (
	AppProtocolHTTP AppProtocol = "http"
	AppProtocolH2C  AppProtocol = "kubernetes.io/h2c"
)

// EndpointPickerRef references the endpoint picker, by default a Service
// in the pool's namespace.
type EndpointPickerRef struct {
	Group       *string     `json:"group,omitempty"`
	Kind        string      `json:"kind,omitempty"`
	Name        string      `json:"name"`
	Port        *Port       `json:"port,omitempty"`
	FailureMode FailureMode `json:"failureMode,omitempty"`
}

// FailureMode is what the gateway does when the endpoint picker does not
// answer: forward anyway (FailOpen) or refuse (FailClose, the default).
type FailureMode string

// The failure modes the API allows.
const (
	FailOpen  FailureMode = "FailOpen"
	FailClose FailureMode = "FailClose"
)

// InferencePoolStatus is what each parent gateway reports of the pool.
type InferencePoolStatus struct {
	Parents []ParentStatus `json:"parents,omitempty"`
}

// ParentStatus is one parent's conditions on the pool.
type ParentStatus struct {
	Conditions     []metav1.Condition `json:"conditions,omitempty"`
	ParentRef      ParentReference    `json:"parentRef"`
	ControllerName string             `json:"controllerName,omitempty"`
}

// ParentReference names a parent, by default a Gateway.
type ParentReference struct {
	Group     *string `json:"group,omitempty"`
	Kind      string  `json:"kind,omitempty"`
	Name      string  `json:"name"`
	Namespace string  `json:"namespace,omitempty"`
}

// The limits of the CRD's schema.
const (
	maxSelectorLabels = 64
	maxTargetPorts    = 8
	maxParents        = 32
)

var (
	labelKey   = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$`)
	labelValue = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)
)

// Validate reports the first way p breaks the limits the API server's
// schema for InferencePool enforces, or nil.
func (p *InferencePool) Validate() error {
	s := &p.Spec
	if n := len(s.Selector.MatchLabels); n < 1 || n > maxSelectorLabels {
		return fmt.Errorf("inferencepool %s: spec.selector.matchLabels has %d entries; it needs 1 to %d", p.Name, n, maxSelectorLabels)
	}
	for k, v := range s.Selector.MatchLabels {
		if len(k) > 253 || !labelKey.MatchString(k) {
			return fmt.Errorf("inferencepool %s: spec.selector.matchLabels: %q is not a label key", p.Name, k)
		}
		if len(v) > 63 || !labelValue.MatchString(v) {
			return fmt.Errorf("inferencepool %s: spec.selector.matchLabels[%s]: %q is not a label value", p.Name, k, v)
		}
	}
	if n := len(s.TargetPorts); n < 1 || n > maxTargetPorts {
		return fmt.Errorf("inferencepool %s: spec.targetPorts has %d entries; it needs 1 to %d", p.Name, n, maxTargetPorts)
	}
	seen := make(map[int32]bool, len(s.TargetPorts))
	for _, tp := range s.TargetPorts {
		if tp.Number < 1 || tp.Number > 65535 {
			return fmt.Errorf("inferencepool %s: spec.targetPorts: %d is not a port number", p.Name, tp.Number)
		}
		if seen[tp.Number] {
			return fmt.Errorf("inferencepool %s: spec.targetPorts: port %d is listed twice", p.Name, tp.Number)
		}
		seen[tp.Number] = true
	}
	switch s.AppProtocol {
	case "", AppProtocolHTTP, AppProtocolH2C:
	default:
		return fmt.Errorf("inferencepool %s: spec.appProtocol %q is neither %q nor %q", p.Name, s.AppProtocol, AppProtocolHTTP, AppProtocolH2C)
	}
	if r := s.EndpointPickerRef; r != nil {
		if r.Name == "" {
			return fmt.Errorf("inferencepool %s: spec.endpointPickerRef.name is empty", p.Name)
		}
		if (r.Kind == "" || r.Kind == "Service") && r.Port == nil {
			return fmt.Errorf("inferencepool %s: spec.endpointPickerRef.port is required when kind is Service", p.Name)
		}
		if r.Port != nil && (r.Port.Number < 1 || r.Port.Number > 65535) {
			return fmt.Errorf("inferencepool %s: spec.endpointPickerRef.port: %d is not a port number", p.Name, r.Port.Number)
		}
		switch r.FailureMode {
		case "", FailOpen, FailClose:
		default:
			return fmt.Errorf("inferencepool %s: spec.endpointPickerRef.failureMode %q is neither %s nor %s", p.Name, r.FailureMode, FailOpen, FailClose)
		}
	}
	if len(p.Status.Parents) > maxParents {
		return fmt.Errorf("inferencepool %s: status.parents has %d entries; at most %d", p.Name, len(p.Status.Parents), maxParents)
	}
	return nil
}

// Ports returns the target port numbers in order.
func (s *InferencePoolSpec) Ports() []int32 {
	out := make([]int32, len(s.TargetPorts))
	for i, tp := range s.TargetPorts {
		out[i] = tp.Number
	}
	return out
}
