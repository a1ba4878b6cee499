// Package helm tests the Helm chart in ./inferrail offline: helm lint, helm template for both
// modes and several value sets (testdata/*.yaml), and every rendered object decoded strictly,
// unknown and duplicate fields being errors, into its Go API type. The helm binary comes from
// scripts/install-helm.sh (make test-chart runs it first); without one every test fails and
// names the script. Nothing is downloaded at test time.
package helm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/build"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"google.golang.org/protobuf/encoding/protojson"
	istionet "istio.io/api/networking/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8sjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/inferrail/inferrail/transport/kubernetes/inferencev1"
)

// The chart, and the release every test renders: the plain manifests in deploy/kubernetes
// are this release too (scripts/render-manifests.sh).
const (
	chartDir  = "inferrail"
	release   = "inferrail"
	namespace = "inference"
)

// destinationRuleGVK is Istio's DestinationRule, the one object decoded by its protobuf
// message: the Go types' own JSON decoder lets unknown fields through.
var destinationRuleGVK = schema.GroupVersionKind{Group: "networking.istio.io", Version: "v1", Kind: "DestinationRule"}

// helmBinary finds helm: $HELM, else scripts/install-helm.sh's directory ($GOBIN, else
// $GOPATH/bin), else $PATH. A missing helm fails the test with the way to install it.
func helmBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("HELM"); p != "" {
		return p
	}
	for _, dir := range []string{os.Getenv("GOBIN"), filepath.Join(build.Default.GOPATH, "bin")} {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, "helm")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	t.Fatal("helm not found: run ./scripts/install-helm.sh (make test-chart runs it), or set HELM to the binary")
	return ""
}

// runHelm runs helm with args and returns its standard output, or an error holding its
// standard error.
func runHelm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(helmBinary(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// helm reads no cluster for lint and template; an empty config keeps it from looking.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(t.TempDir(), "none"), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return stdout.Bytes(), nil
}

// valueArgs turns a values file under testdata (or "" for the defaults) and --set
// assignments into helm's arguments.
func valueArgs(values string, set []string) []string {
	var args []string
	if values != "" {
		args = append(args, "--values", filepath.Join("testdata", values))
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return args
}

// render runs helm template for the release and returns its objects, each decoded strictly.
func render(t *testing.T, values string, set ...string) rendered {
	t.Helper()
	args := append([]string{"template", release, chartDir, "--namespace", namespace}, valueArgs(values, set)...)
	out, err := runHelm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeAll(out)
	if err != nil {
		t.Fatalf("values %q %v: %v", values, set, err)
	}
	return objs
}

// object is one rendered object: its coordinates, and its value as its API type.
type object struct {
	GVK       schema.GroupVersionKind
	Name      string
	Namespace string
	Labels    map[string]string
	Value     any
}

func (o object) String() string { return o.GVK.Kind + "/" + o.Name }

type rendered []object

// all returns the objects of one kind.
func (r rendered) all(kind string) []object {
	var out []object
	for _, o := range r {
		if o.GVK.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

// one returns the only object of one kind, as its type.
func one[T any](t *testing.T, r rendered, kind string) T {
	t.Helper()
	objs := r.all(kind)
	if len(objs) != 1 {
		t.Fatalf("%d objects of kind %s, want 1 (rendered: %v)", len(objs), kind, r.names())
	}
	v, ok := objs[0].Value.(T)
	if !ok {
		t.Fatalf("%s decoded as %T", objs[0], objs[0].Value)
	}
	return v
}

// names lists the objects as Kind/name, sorted.
func (r rendered) names() []string {
	out := make([]string, len(r))
	for i, o := range r {
		out[i] = o.String()
	}
	sort.Strings(out)
	return out
}

// decodeAll splits a stream of YAML documents and decodes each object strictly; documents
// holding only comments are skipped.
func decodeAll(stream []byte) (rendered, error) {
	dec := strictDecoder()
	rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var out rendered
	var errs []error
	for i := 0; ; i++ {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if blank(doc) {
			continue
		}
		o, err := decode(dec, doc)
		if err != nil {
			errs = append(errs, fmt.Errorf("document %d: %w\n%s", i, err, doc))
			continue
		}
		out = append(out, o)
	}
	return out, errors.Join(errs...)
}

// blank reports whether a document holds nothing but comments and blank lines.
func blank(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		if s := strings.TrimSpace(line); s != "" && s != "---" && !strings.HasPrefix(s, "#") {
			return false
		}
	}
	return true
}

// strictDecoder decodes client-go's kinds (core, apps, rbac), Gateway API and Prometheus
// Operator objects, failing on unknown or duplicate fields.
func strictDecoder() runtime.Decoder {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, gatewayv1.Install, monitoringv1.AddToScheme} {
		if err := add(s); err != nil {
			panic("BUG: scheme: " + err.Error())
		}
	}
	return k8sjson.NewSerializerWithOptions(k8sjson.DefaultMetaFactory, s, s, k8sjson.SerializerOptions{Yaml: true, Strict: true})
}

// decode decodes one object strictly into its API type: an InferencePool into inferencev1's
// (then Validate), a DestinationRule's spec into Istio's protobuf message, anything else
// through the scheme. A kind none of them knows is an error.
func decode(dec runtime.Decoder, doc []byte) (object, error) {
	var tm metav1.TypeMeta
	if err := sigsyaml.Unmarshal(doc, &tm); err != nil {
		return object{}, err
	}
	gvk := tm.GroupVersionKind()
	switch gvk {
	case inferencev1.GroupVersionKind:
		var p inferencev1.InferencePool
		if err := sigsyaml.UnmarshalStrict(doc, &p); err != nil {
			return object{}, fmt.Errorf("%s: %w", gvk.Kind, err)
		}
		if err := p.Validate(); err != nil {
			return object{}, err
		}
		return object{GVK: gvk, Name: p.Name, Namespace: p.Namespace, Labels: p.Labels, Value: &p}, nil
	case destinationRuleGVK:
		var env struct {
			metav1.TypeMeta   `json:",inline"`
			metav1.ObjectMeta `json:"metadata"`
			Spec              json.RawMessage `json:"spec"`
		}
		if err := sigsyaml.UnmarshalStrict(doc, &env); err != nil {
			return object{}, fmt.Errorf("%s: %w", gvk.Kind, err)
		}
		var spec istionet.DestinationRule
		if err := protojson.Unmarshal(env.Spec, &spec); err != nil {
			return object{}, fmt.Errorf("%s: spec: %w", gvk.Kind, err)
		}
		return object{GVK: gvk, Name: env.Name, Namespace: env.Namespace, Labels: env.Labels, Value: &spec}, nil
	}
	obj, _, err := dec.Decode(doc, nil, nil)
	if err != nil {
		return object{}, err
	}
	meta, ok := obj.(metav1.Object)
	if !ok {
		return object{}, fmt.Errorf("%s has no object metadata", gvk)
	}
	return object{GVK: gvk, Name: meta.GetName(), Namespace: meta.GetNamespace(), Labels: meta.GetLabels(), Value: obj}, nil
}

// TestDecodeRejects proves the decoders strict: each document is valid but for one field no
// API type has (or one field given twice), and each must fail.
func TestDecodeRejects(t *testing.T) {
	f := func(name, doc string) {
		t.Helper()
		if _, err := decodeAll([]byte(doc)); err == nil {
			t.Errorf("%s: decoded without an error", name)
		}
	}
	f("Service", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: 80, tragetPort: 80}]}\n")
	f("Deployment", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec: {replicas: 1, replica: 1}\n")
	f("duplicate field", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {a: b}\ndata: {c: d}\n")
	f("HTTPRoute", "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: a}\nspec: {rules: [{backendRef: []}]}\n")
	f("ServiceMonitor", "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: a}\nspec: {endpoints: [{prot: metrics}]}\n")
	f("InferencePool field", "apiVersion: inference.networking.k8s.io/v1\nkind: InferencePool\nmetadata: {name: a}\nspec: {selector: {matchLabels: {a: b}}, targetPorts: [{number: 8000}], endpointPicker: {name: e}}\n")
	f("InferencePool limits", "apiVersion: inference.networking.k8s.io/v1\nkind: InferencePool\nmetadata: {name: a}\nspec: {selector: {matchLabels: {a: b}}, targetPorts: []}\n")
	f("DestinationRule", "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: a}\nspec: {host: a, trafficPolicy: {tls: {mode: SIMPLE, insecureSkip: true}}}\n")
	f("unknown kind", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: a}\n")

	// And the same shapes, spelled right, decode.
	ok := "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: a}\nspec: {host: a, trafficPolicy: {tls: {mode: SIMPLE, insecureSkipVerify: true}}}\n" +
		"---\napiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: 80, targetPort: 80}]}\n"
	if objs, err := decodeAll([]byte(ok)); err != nil || len(objs) != 2 {
		t.Errorf("valid documents: %d objects, %v", len(objs), err)
	}
}
