package inferencev1

import (
	"encoding/json"
	"strings"
	"testing"
)

func validPool() InferencePool {
	return InferencePool{
		Spec: InferencePoolSpec{
			Selector:    LabelSelector{MatchLabels: map[string]string{"app": "vllm", "llm-d.ai/role": "decode"}},
			TargetPorts: []Port{{Number: 8000}, {Number: 8001}},
			EndpointPickerRef: &EndpointPickerRef{
				Name: "inferrail-epp", Port: &Port{Number: 9002},
			},
		},
	}
}

// TestValidate holds each schema limit to a pool that breaks it, and a pool
// that keeps them all.
func TestValidate(t *testing.T) {
	p := validPool()
	if err := p.Validate(); err != nil {
		t.Fatalf("valid pool refused: %v", err)
	}
	cases := map[string]func(p *InferencePool){
		"matchLabels":        func(p *InferencePool) { p.Spec.Selector.MatchLabels = nil },
		"not a label key":    func(p *InferencePool) { p.Spec.Selector.MatchLabels["bad key"] = "x" },
		"not a label value":  func(p *InferencePool) { p.Spec.Selector.MatchLabels["app"] = "-x" },
		"targetPorts has 0":  func(p *InferencePool) { p.Spec.TargetPorts = nil },
		"targetPorts has 9":  func(p *InferencePool) { p.Spec.TargetPorts = make([]Port, 9) },
		"listed twice":       func(p *InferencePool) { p.Spec.TargetPorts = []Port{{8000}, {8000}} },
		"not a port number":  func(p *InferencePool) { p.Spec.TargetPorts = []Port{{70000}} },
		"appProtocol":        func(p *InferencePool) { p.Spec.AppProtocol = "grpc" },
		"port is required":   func(p *InferencePool) { p.Spec.EndpointPickerRef.Port = nil },
		"name is empty":      func(p *InferencePool) { p.Spec.EndpointPickerRef.Name = "" },
		"failureMode":        func(p *InferencePool) { p.Spec.EndpointPickerRef.FailureMode = "Maybe" },
		"status.parents has": func(p *InferencePool) { p.Status.Parents = make([]ParentStatus, 33) },
	}
	for want, breakIt := range cases {
		p := validPool()
		breakIt(&p)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Validate = %v", want, err)
		}
	}
}

// TestJSONNames checks the wire names against a pool as kubectl would
// print it.
func TestJSONNames(t *testing.T) {
	in := `{"apiVersion":"inference.networking.k8s.io/v1","kind":"InferencePool",
	"metadata":{"name":"qwen","namespace":"llm"},
	"spec":{"selector":{"matchLabels":{"app":"vllm"}},"targetPorts":[{"number":8000}],
	"appProtocol":"http","endpointPickerRef":{"name":"epp","port":{"number":9002},"failureMode":"FailOpen"}}}`
	dec := json.NewDecoder(strings.NewReader(in))
	dec.DisallowUnknownFields()
	var p InferencePool
	if err := dec.Decode(&p); err != nil {
		t.Fatal(err)
	}
	if p.APIVersion != Group+"/"+Version || p.Kind != Kind || p.Name != "qwen" {
		t.Fatalf("meta: %+v", p.TypeMeta)
	}
	if got := p.Spec.Ports(); len(got) != 1 || got[0] != 8000 {
		t.Fatalf("ports %v", got)
	}
	if r := p.Spec.EndpointPickerRef; r.Port.Number != 9002 || r.FailureMode != FailOpen {
		t.Fatalf("ref %+v", r)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
}
