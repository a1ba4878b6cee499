package helm

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	istionet "istio.io/api/networking/v1alpha3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/transport/kubernetes/inferencev1"
)

// variant is one set of values and the objects it must render, as Kind/name.
type variant struct {
	values string   // a file under testdata, or "" for the chart's defaults
	set    []string // --set assignments
	mode   string
	want   []string
}

// The objects every release of a mode renders.
var (
	gatewayObjects = []string{"ConfigMap/inferrail", "Deployment/inferrail", "Service/inferrail", "Service/inferrail-vllm", "ServiceAccount/inferrail"}
	eppObjects     = []string{"ConfigMap/inferrail", "Deployment/inferrail", "Role/inferrail", "RoleBinding/inferrail", "Service/inferrail", "ServiceAccount/inferrail"}
)

func with(base []string, more ...string) []string { return append(slices.Clone(base), more...) }

var variants = map[string]variant{
	"gateway":           {set: []string{"mode=gateway"}, mode: "gateway", want: gatewayObjects},
	"gateway-full":      {values: "gateway-full.yaml", mode: "gateway", want: with(gatewayObjects, "ServiceMonitor/inferrail")},
	"gateway-nokv":      {values: "gateway-nokv.yaml", mode: "gateway", want: gatewayObjects},
	"epp":               {set: []string{"mode=epp"}, mode: "epp", want: with(eppObjects, "HTTPRoute/inferrail", "InferencePool/inferrail")},
	"epp-istio":         {values: "epp-istio.yaml", mode: "epp", want: with(eppObjects, "HTTPRoute/inferrail", "InferencePool/inferrail", "Gateway/inference-gateway", "DestinationRule/inferrail", "ServiceMonitor/inferrail")},
	"epp-kgateway":      {values: "epp-kgateway.yaml", mode: "epp", want: with(eppObjects, "HTTPRoute/inferrail", "InferencePool/inferrail", "Gateway/inference-gateway")},
	"epp-envoy":         {values: "epp-envoy.yaml", mode: "epp", want: with(eppObjects, "HTTPRoute/inferrail", "InferencePool/inferrail", "Gateway/inference-gateway")},
	"epp-selector":      {values: "epp-selector.yaml", mode: "epp", want: eppObjects},
	"epp-existing-pool": {values: "epp-existing-pool.yaml", mode: "epp", want: with(eppObjects, "HTTPRoute/inferrail")},
	"gateway-two":       {set: []string{"mode=gateway", "replicaCount=2"}, mode: "gateway", want: with(gatewayObjects, "Service/inferrail-peers")},
	"epp-two":           {set: []string{"mode=epp", "replicaCount=2"}, mode: "epp", want: with(eppObjects, "HTTPRoute/inferrail", "InferencePool/inferrail", "Service/inferrail-peers")},
	"gateway-two-nokv":  {set: []string{"mode=gateway", "replicaCount=2", "modelServers.kvEventsPort=0"}, mode: "gateway", want: with(gatewayObjects, "Service/inferrail-peers")},
}

func sortedVariants() []string {
	names := make([]string, 0, len(variants))
	for n := range variants {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (v variant) render(t *testing.T) rendered {
	t.Helper()
	return render(t, v.values, v.set...)
}

// TestLint runs helm lint --strict with every variant's values.
func TestLint(t *testing.T) {
	for _, name := range sortedVariants() {
		v := variants[name]
		t.Run(name, func(t *testing.T) {
			args := append([]string{"lint", "--strict", chartDir, "--namespace", namespace}, valueArgs(v.values, v.set)...)
			if out, err := runHelm(t, args...); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

// TestRender renders every variant: each object decodes strictly into its API type, the set
// of objects is the expected one, and each sits in the release's namespace (a created Gateway
// in its own) with the chart's labels.
func TestRender(t *testing.T) {
	for _, name := range sortedVariants() {
		v := variants[name]
		t.Run(name, func(t *testing.T) {
			objs := v.render(t)
			want := slices.Clone(v.want)
			sort.Strings(want)
			if got := objs.names(); !slices.Equal(got, want) {
				t.Errorf("objects:\n got %v\nwant %v", got, want)
			}
			vals := chartValues(t, v)
			for _, o := range objs {
				wantNS := namespace
				if o.GVK.Kind == "Gateway" {
					if ns, _ := vals.get("inferenceGateway", "namespace").(string); ns != "" {
						wantNS = ns
					}
				}
				if o.Namespace != wantNS {
					t.Errorf("%s: namespace %q, want %q", o, o.Namespace, wantNS)
				}
				component := v.mode
				switch o.String() {
				case "Service/inferrail-vllm":
					component = "model-servers"
				case "Service/inferrail-peers":
					component = "peers"
				}
				wantLabels := map[string]string{
					"app.kubernetes.io/name":       "inferrail",
					"app.kubernetes.io/instance":   release,
					"app.kubernetes.io/managed-by": "Helm",
					"app.kubernetes.io/component":  component,
				}
				if common, ok := vals.get("commonLabels").(map[string]any); ok {
					for k, val := range common {
						wantLabels[k] = val.(string)
					}
				}
				for k, val := range wantLabels {
					if o.Labels[k] != val {
						t.Errorf("%s: label %s=%q, want %q", o, k, o.Labels[k], val)
					}
				}
				if !strings.HasPrefix(o.Labels["helm.sh/chart"], "inferrail-") || o.Labels["app.kubernetes.io/version"] == "" {
					t.Errorf("%s: labels %v lack the chart and version", o, o.Labels)
				}
			}
			selectorsAgree(t, objs)
		})
	}
}

// selectorsAgree checks that the Deployment's selector picks its own pods, that the
// Service selects them too, and that a ServiceMonitor selects that Service and no other.
func selectorsAgree(t *testing.T, objs rendered) {
	t.Helper()
	dep := one[*appsv1.Deployment](t, objs, "Deployment")
	podLabels := labels.Set(dep.Spec.Template.Labels)
	sel, err := metav1LabelSelector(dep)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(podLabels) {
		t.Errorf("the Deployment's selector %v misses its pod labels %v", sel, podLabels)
	}
	svc := service(t, objs, "inferrail")
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
		t.Errorf("Service %s selects %v, not the pods %v", svc.Name, svc.Spec.Selector, podLabels)
	}
	for _, o := range objs.all("ServiceMonitor") {
		sm := o.Value.(*monitoringv1.ServiceMonitor)
		smSel := labels.SelectorFromSet(sm.Spec.Selector.MatchLabels)
		for _, s := range objs.all("Service") {
			matches := smSel.Matches(labels.Set(s.Labels))
			if matches != (s.Name == svc.Name) {
				t.Errorf("ServiceMonitor %s selects Service %s: %v", sm.Name, s.Name, matches)
			}
		}
		if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" || servicePort(t, svc, "metrics") == nil {
			t.Errorf("ServiceMonitor %s endpoints %+v: want the Service's metrics port", sm.Name, sm.Spec.Endpoints)
		}
	}
}

func metav1LabelSelector(d *appsv1.Deployment) (labels.Selector, error) {
	if d.Spec.Selector == nil {
		return nil, errors.New("the Deployment has no selector")
	}
	return labels.SelectorFromSet(d.Spec.Selector.MatchLabels), nil
}

// service returns the Service of that name.
func service(t *testing.T, objs rendered, name string) *corev1.Service {
	t.Helper()
	for _, o := range objs.all("Service") {
		if o.Name == name {
			return o.Value.(*corev1.Service)
		}
	}
	t.Fatalf("no Service %s in %v", name, objs.names())
	return nil
}

// servicePort returns the Service's port of that name, or nil.
func servicePort(t *testing.T, svc *corev1.Service, name string) *corev1.ServicePort {
	t.Helper()
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Name == name {
			return &svc.Spec.Ports[i]
		}
	}
	return nil
}

// containerPort returns the inferrail container's port of that name, or 0.
func containerPort(t *testing.T, dep *appsv1.Deployment, name string) int32 {
	t.Helper()
	for _, p := range dep.Spec.Template.Spec.Containers[0].Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// targetsContainer checks that a Service port reaches the container port it names.
func targetsContainer(t *testing.T, svc *corev1.Service, dep *appsv1.Deployment, name string) int32 {
	t.Helper()
	sp := servicePort(t, svc, name)
	if sp == nil {
		t.Fatalf("Service %s has no port %s", svc.Name, name)
	}
	if sp.TargetPort.StrVal != name {
		t.Errorf("Service port %s targets %v, want the container port %s", name, sp.TargetPort, name)
	}
	cp := containerPort(t, dep, name)
	if cp == 0 {
		t.Fatalf("the container has no port %s", name)
	}
	return cp
}

// portOf returns the port of a host:port listen address.
func portOf(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	return int32(n)
}

// configYAML returns the config file the release's ConfigMap holds.
func configYAML(t *testing.T, objs rendered) []byte {
	t.Helper()
	cm := one[*corev1.ConfigMap](t, objs, "ConfigMap")
	doc, ok := cm.Data["config.yaml"]
	if !ok {
		t.Fatalf("ConfigMap %s has no config.yaml: %v", cm.Name, cm.Data)
	}
	return []byte(doc)
}

// loadConfig loads the ConfigMap's config file through config.Load, as `inferrail serve
// --config` reads it from the mounted volume.
func loadConfig(t *testing.T, objs rendered) (*config.Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, configYAML(t, objs), 0o600); err != nil {
		t.Fatal(err)
	}
	return config.Load(path, nil)
}

// TestGatewayConfigLoads loads each gateway variant's config through config.Load, with its
// validation, and checks that it listens where the Deployment and Service expect, and that
// its DNS groups name the headless Service on each target port, with the KV-events port of
// each rank.
func TestGatewayConfigLoads(t *testing.T) {
	for _, name := range []string{"gateway", "gateway-full", "gateway-nokv"} {
		v := variants[name]
		t.Run(name, func(t *testing.T) {
			objs := v.render(t)
			c, err := loadConfig(t, objs)
			if err != nil {
				t.Fatalf("the ConfigMap's config does not load: %v\n%s", err, configYAML(t, objs))
			}
			dep := one[*appsv1.Deployment](t, objs, "Deployment")
			svc := service(t, objs, "inferrail")
			if got, want := portOf(t, c.Server.Listen), targetsContainer(t, svc, dep, "http"); got != want {
				t.Errorf("server.listen port %d, container port http %d", got, want)
			}
			if got, want := portOf(t, c.Server.AdminListen), targetsContainer(t, svc, dep, "metrics"); got != want {
				t.Errorf("server.admin_listen port %d, container port metrics %d", got, want)
			}
			vals := chartValues(t, v)
			var names []string
			for _, m := range c.Models {
				names = append(names, m.Name)
			}
			headless := service(t, objs, "inferrail-vllm")
			if headless.Spec.ClusterIP != corev1.ClusterIPNone {
				t.Errorf("Service %s: clusterIP %q, want None (headless)", headless.Name, headless.Spec.ClusterIP)
			}
			ports := vals.ints("modelServers", "targetPorts")
			if len(c.Discovery.DNS) != len(ports) {
				t.Fatalf("%d DNS groups for target ports %v", len(c.Discovery.DNS), ports)
			}
			kvBase := vals.int("modelServers", "kvEventsPort")
			for i, g := range c.Discovery.DNS {
				u, err := url.Parse(g.URL)
				if err != nil {
					t.Fatal(err)
				}
				if want := headless.Name + "." + namespace + ".svc.cluster.local"; u.Hostname() != want {
					t.Errorf("discovery.dns[%d] resolves %s, want the headless Service %s", i, u.Hostname(), want)
				}
				if u.Port() != strconv.Itoa(ports[i]) || servicePortNumbered(headless, int32(ports[i])) == nil {
					t.Errorf("discovery.dns[%d] port %s: target port %d, headless ports %v", i, u.Port(), ports[i], headless.Spec.Ports)
				}
				wantKV := 0
				if kvBase != 0 {
					wantKV = kvBase + i // vLLM offsets the KV-events port by the data-parallel rank
				}
				if g.KVEventsPort != wantKV {
					t.Errorf("discovery.dns[%d].kv_events_port %d, want %d", i, g.KVEventsPort, wantKV)
				}
				if !slices.Equal(g.Models, names) {
					t.Errorf("discovery.dns[%d].models %v, want %v", i, g.Models, names)
				}
				if g.EngineType != vals.get("modelServers", "engineType") {
					t.Errorf("discovery.dns[%d].engine_type %q, want %v", i, g.EngineType, vals.get("modelServers", "engineType"))
				}
			}
			// The values' config is laid under the chart's keys.
			if name == "gateway-full" {
				g := c.Discovery.DNS[0]
				if c.Routing.DefaultPolicy != "cost_model" || c.Server.RequestTimeout != 10*time.Minute || c.Server.MaxBodyBytes != 33554432 || c.Logging.Format != "json" || g.Refresh != 10*time.Second || g.MaxConcurrency != 256 {
					t.Errorf("the values' config was not applied: routing %+v, server %+v, logging %+v, dns %+v", c.Routing.DefaultPolicy, c.Server, c.Logging.Format, g)
				}
			}
		})
	}
}

func servicePortNumbered(svc *corev1.Service, port int32) *corev1.ServicePort {
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Port == port {
			return &svc.Spec.Ports[i]
		}
	}
	return nil
}

// TestEPPPortsAgree checks, for each EPP variant, that the InferencePool's endpointPickerRef
// names the EPP Service's ext_proc port, that every Service port reaches the container port of
// its name, and that the config listens on those ports: ext_proc, health (the probes' port) and
// metrics. It also checks the config's discovery against the pool.
func TestEPPPortsAgree(t *testing.T) {
	for _, name := range sortedVariants() {
		v := variants[name]
		if v.mode != "epp" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			objs := v.render(t)
			cfg, err := loadConfig(t, objs)
			if err != nil {
				t.Fatalf("the EPP config does not load as inferrail epp loads it: %v", err)
			}
			dep := one[*appsv1.Deployment](t, objs, "Deployment")
			svc := service(t, objs, "inferrail")
			ext := targetsContainer(t, svc, dep, "grpc-ext-proc")
			health := targetsContainer(t, svc, dep, "grpc-health")
			metrics := targetsContainer(t, svc, dep, "metrics")
			if p := servicePort(t, svc, "grpc-ext-proc"); p.Port != ext || p.AppProtocol == nil || *p.AppProtocol != "http2" {
				t.Errorf("ext_proc Service port %d appProtocol %v, want %d http2", p.Port, p.AppProtocol, ext)
			}
			if got := portOf(t, cfg.ExtProc.Listen); got != ext {
				t.Errorf("ext_proc.listen port %d, container port %d", got, ext)
			}
			if got := portOf(t, cfg.ExtProc.HealthListen); got != health {
				t.Errorf("ext_proc.health_listen port %d, container port %d", got, health)
			}
			if got := portOf(t, cfg.ExtProc.AdminListen); got != metrics {
				t.Errorf("ext_proc.admin_listen port %d, container port %d", got, metrics)
			}
			if ext != 9002 || health != 9003 || metrics != 9090 {
				t.Errorf("ports %d, %d, %d; llm-d's EPP uses 9002, 9003 and 9090", ext, health, metrics)
			}
			c := dep.Spec.Template.Spec.Containers[0]
			for probe, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
				if p == nil || p.GRPC == nil || p.GRPC.Port != health || p.GRPC.Service == nil || *p.GRPC.Service != probe {
					t.Errorf("%s probe %+v, want gRPC on port %d, service %s", probe, p, health, probe)
				}
			}
			if !slices.Equal(c.Args, []string{"epp", "--config", "/etc/inferrail/config.yaml"}) {
				t.Errorf("args %v", c.Args)
			}

			vals := chartValues(t, v)
			k := cfg.Discovery.Kubernetes
			if k.PoolNamespace != namespace {
				t.Errorf("discovery.kubernetes.pool_namespace %q", k.PoolNamespace)
			}
			if got := len(k.Models); got != len(cfg.Models) || got == 0 {
				t.Errorf("discovery.kubernetes.models %v for models %v", k.Models, cfg.Models)
			}
			role := one[*rbacv1.Role](t, objs, "Role")
			pools := objs.all("InferencePool")
			switch vals.get("epp", "discovery") {
			case "selector":
				want := vals.strings("modelServers", "matchLabels")
				if k.PoolName != "" || !maps.Equal(k.EndpointSelector, want) || !slices.Equal(k.TargetPorts, vals.ints("modelServers", "targetPorts")) {
					t.Errorf("discovery.kubernetes %+v, want endpoint_selector %v and the target ports", k, want)
				}
				if readsPools(role) {
					t.Errorf("Role %s reads inferencepools with no pool", role.Name)
				}
			default:
				if len(k.EndpointSelector) != 0 || len(k.TargetPorts) != 0 {
					t.Errorf("discovery.kubernetes %+v: a pool and a selector", k)
				}
				if !readsPools(role) || !readsPods(role) {
					t.Errorf("Role %s rules %+v: want get, list and watch of pods and inferencepools", role.Name, role.Rules)
				}
				route := one[*gatewayv1.HTTPRoute](t, objs, "HTTPRoute")
				ref := route.Spec.Rules[0].BackendRefs[0]
				if ref.Group == nil || string(*ref.Group) != inferencev1.Group || ref.Kind == nil || string(*ref.Kind) != inferencev1.Kind || string(ref.Name) != k.PoolName {
					t.Errorf("HTTPRoute backendRef %+v, want the InferencePool %s", ref.BackendObjectReference, k.PoolName)
				}
				if len(pools) == 0 {
					break // a pool made elsewhere
				}
				pool := pools[0].Value.(*inferencev1.InferencePool)
				if pool.Name != k.PoolName {
					t.Errorf("pool %s, discovery.kubernetes.pool_name %s", pool.Name, k.PoolName)
				}
				r := pool.Spec.EndpointPickerRef
				if r == nil || (r.Kind != "" && r.Kind != "Service") || r.Name != svc.Name || r.Port == nil || r.Port.Number != servicePort(t, svc, "grpc-ext-proc").Port {
					t.Errorf("endpointPickerRef %+v, want Service %s port %d", r, svc.Name, ext)
				}
				if want := vals.get("inferencePool", "failureMode"); string(r.FailureMode) != want {
					t.Errorf("failureMode %q, want %v", r.FailureMode, want)
				}
				if !slices.Equal(intsOf(pool.Spec.Ports()), vals.ints("modelServers", "targetPorts")) {
					t.Errorf("targetPorts %v", pool.Spec.Ports())
				}
				if !reflect.DeepEqual(pool.Spec.Selector.MatchLabels, vals.strings("modelServers", "matchLabels")) {
					t.Errorf("pool selector %v", pool.Spec.Selector.MatchLabels)
				}
			}
			for _, o := range objs.all("DestinationRule") {
				dr := o.Value.(*istionet.DestinationRule)
				if want := svc.Name + "." + namespace + ".svc.cluster.local"; dr.Host != want {
					t.Errorf("DestinationRule host %q, want %q", dr.Host, want)
				}
			}
			for _, o := range objs.all("Gateway") {
				gw := o.Value.(*gatewayv1.Gateway)
				route := one[*gatewayv1.HTTPRoute](t, objs, "HTTPRoute")
				parent := route.Spec.ParentRefs[0]
				if string(parent.Name) != gw.Name || (gw.Namespace != namespace && (parent.Namespace == nil || string(*parent.Namespace) != gw.Namespace)) {
					t.Errorf("HTTPRoute parent %+v, Gateway %s/%s", parent, gw.Namespace, gw.Name)
				}
				if gw.Spec.GatewayClassName == "" {
					t.Errorf("Gateway %s has no class", gw.Name)
				}
			}
		})
	}
}

func readsPods(r *rbacv1.Role) bool  { return grants(r, "", "pods") }
func readsPools(r *rbacv1.Role) bool { return grants(r, inferencev1.Group, inferencev1.Resource) }

// grants reports whether a rule of r allows get, list and watch of the resource.
func grants(r *rbacv1.Role, group, resource string) bool {
	for _, rule := range r.Rules {
		if slices.Contains(rule.APIGroups, group) && slices.Contains(rule.Resources, resource) &&
			slices.Contains(rule.Verbs, "get") && slices.Contains(rule.Verbs, "list") && slices.Contains(rule.Verbs, "watch") {
			return true
		}
	}
	return false
}

func intsOf(ports []int32) []int {
	out := make([]int, len(ports))
	for i, p := range ports {
		out[i] = int(p)
	}
	return out
}

// TestExampleVLLMMatchesChart decodes deploy/kubernetes/vllm.yaml strictly and checks it
// against the chart's defaults: the InferencePool and the headless Service select its pods,
// it serves on the target port, publishes KV events on kvEventsPort (the containerPort and the
// --kv-events-config endpoint), and uses the models' block size.
func TestExampleVLLMMatchesChart(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "kubernetes", "vllm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeAll(doc)
	if err != nil {
		t.Fatal(err)
	}
	vllm := one[*appsv1.Deployment](t, objs, "Deployment")
	if vllm.Namespace != namespace {
		t.Errorf("vLLM namespace %q, want %q", vllm.Namespace, namespace)
	}
	pods := labels.Set(vllm.Spec.Template.Labels)

	pool := one[*inferencev1.InferencePool](t, variants["epp"].render(t), "InferencePool")
	if !labels.SelectorFromSet(pool.Spec.Selector.MatchLabels).Matches(pods) {
		t.Errorf("the InferencePool selects %v, not the vLLM pods %v", pool.Spec.Selector.MatchLabels, pods)
	}
	gw := variants["gateway"].render(t)
	headless := service(t, gw, "inferrail-vllm")
	if !labels.SelectorFromSet(headless.Spec.Selector).Matches(pods) {
		t.Errorf("the headless Service selects %v, not the vLLM pods %v", headless.Spec.Selector, pods)
	}
	c, err := loadConfig(t, gw)
	if err != nil {
		t.Fatal(err)
	}

	ctr := vllm.Spec.Template.Spec.Containers[0]
	ports := map[string]int32{}
	for _, p := range ctr.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if got := pool.Spec.Ports(); len(got) != 1 || got[0] != ports["http"] {
		t.Errorf("pool target ports %v, vLLM serves on %d", got, ports["http"])
	}
	kv := c.Discovery.DNS[0].KVEventsPort
	if ports["kv-events"] != int32(kv) {
		t.Errorf("vLLM publishes KV events on containerPort %d, the gateway reads port %d", ports["kv-events"], kv)
	}
	flags := flagValues(ctr.Args)
	var kvc struct {
		Enable    bool   `json:"enable_kv_cache_events"`
		Publisher string `json:"publisher"`
		Endpoint  string `json:"endpoint"`
	}
	if err := json.Unmarshal([]byte(flags["--kv-events-config"]), &kvc); err != nil {
		t.Fatalf("--kv-events-config %q: %v", flags["--kv-events-config"], err)
	}
	if want := "tcp://*:" + strconv.Itoa(kv); !kvc.Enable || kvc.Publisher != "zmq" || kvc.Endpoint != want {
		t.Errorf("--kv-events-config %+v, want enabled zmq on %s", kvc, want)
	}
	if flags["--port"] != strconv.Itoa(int(ports["http"])) {
		t.Errorf("--port %q, containerPort http %d", flags["--port"], ports["http"])
	}
	if flags["--block-size"] != strconv.Itoa(c.Models[0].BlockSize) {
		t.Errorf("--block-size %q, models[0].block_size %d", flags["--block-size"], c.Models[0].BlockSize)
	}
	if ctr.Args[0] != c.Models[0].Name {
		t.Errorf("vLLM serves %q, the chart's model is %q", ctr.Args[0], c.Models[0].Name)
	}
}

// flagValues reads --flag=value and --flag value arguments.
func flagValues(args []string) map[string]string {
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "--") {
			continue
		}
		if k, v, ok := strings.Cut(a, "="); ok {
			out[k] = v
		} else if i+1 < len(args) {
			out[a] = args[i+1]
			i++
		}
	}
	return out
}

// TestBadValuesFail renders values the chart must refuse, each with an error naming the value.
func TestBadValuesFail(t *testing.T) {
	f := func(want string, set ...string) {
		t.Helper()
		args := append([]string{"template", release, chartDir, "--namespace", namespace}, valueArgs("", set)...)
		_, err := runHelm(t, args...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--set %v: error %v, want one naming %q", set, err, want)
		}
	}
	f("mode", "mode=proxy")
	f("modelServers.matchLabels", "modelServers.matchLabels=null")
	f("modelServers.targetPorts", "modelServers.targetPorts={1,2,3,4,5,6,7,8,9}")
	f("modelServers.targetPorts", "modelServers.targetPorts={8000,8000}")
	f("modelServers.engineType", "modelServers.engineType=tgi")
	f("models", "models=null")
	f("epp.discovery", "mode=epp", "epp.discovery=dns")
	f("provider.name", "mode=epp", "provider.name=nginx")
	f("inferencePool.failureMode", "mode=epp", "inferencePool.failureMode=Open")
	f("inferenceGateway.className", "mode=epp", "provider.name=envoy", "inferenceGateway.create=true")
}

// TestManifestsCurrent renders deploy/kubernetes afresh with scripts/render-manifests.sh and
// compares it with the committed files, so that they cannot drift from the chart.
func TestManifestsCurrent(t *testing.T) {
	dir := t.TempDir()
	cmd := execCommand(t, filepath.Join("..", "..", "scripts", "render-manifests.sh"), dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("render-manifests.sh: %v\n%s", err, out)
	}
	for _, name := range []string{"gateway.yaml", "epp.yaml"} {
		fresh, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		committed, err := os.ReadFile(filepath.Join("..", "kubernetes", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fresh, committed) {
			t.Errorf("deploy/kubernetes/%s differs from a fresh render: run scripts/render-manifests.sh", name)
		}
		if _, err := decodeAll(committed); err != nil {
			t.Errorf("deploy/kubernetes/%s: %v", name, err)
		}
	}
}

// TestPeersFindEachOther: with more than one pod, each pod's config names
// the headless Service of the release's own pods as index.warm_start_dns,
// on the port that reaches their admin listener, so a starting pod copies a
// peer's index; with one pod neither appears.
func TestPeersFindEachOther(t *testing.T) {
	for _, name := range []string{"gateway-two", "epp-two", "gateway", "epp"} {
		v := variants[name]
		t.Run(name, func(t *testing.T) {
			objs := v.render(t)
			c, err := loadConfig(t, objs)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(v.want, "Service/inferrail-peers") {
				if c.Index.WarmStartDNS != "" {
					t.Errorf("one pod, index.warm_start_dns %q", c.Index.WarmStartDNS)
				}
				return
			}
			peers := service(t, objs, "inferrail-peers")
			if peers.Spec.ClusterIP != corev1.ClusterIPNone || peers.Spec.PublishNotReadyAddresses {
				t.Errorf("Service inferrail-peers: clusterIP %q, publishNotReadyAddresses %v; want a headless Service of ready pods",
					peers.Spec.ClusterIP, peers.Spec.PublishNotReadyAddresses)
			}
			dep := one[*appsv1.Deployment](t, objs, "Deployment")
			u, err := url.Parse(c.Index.WarmStartDNS)
			if err != nil || u.Hostname() != "inferrail-peers."+namespace+".svc.cluster.local" {
				t.Fatalf("index.warm_start_dns %q (%v), want the peers Service's name", c.Index.WarmStartDNS, err)
			}
			admin := c.Server.AdminListen
			if v.mode == "epp" {
				admin = c.ExtProc.AdminListen
			}
			port := targetsContainer(t, peers, dep, "metrics")
			if got := portOf(t, u.Host); got != port || port != portOf(t, admin) {
				t.Errorf("index.warm_start_dns port %d, the peers Service reaches container port %d, admin listens on %s", got, port, admin)
			}
		})
	}
}

// TestColdRendezvousWithoutEvents: several pods that follow no KV events
// get routing.cold_rendezvous, so they place prompts no engine holds
// alike; with events, with one pod, or when the values set it, the chart
// leaves it as configured.
func TestColdRendezvousWithoutEvents(t *testing.T) {
	for _, c := range []struct {
		name string
		set  []string
		want bool
	}{
		{"two pods, no events", variants["gateway-two-nokv"].set, true},
		{"two pods, no events, set off", append(slices.Clone(variants["gateway-two-nokv"].set), "config.routing.cold_rendezvous=false"), false},
		{"two pods, events", variants["gateway-two"].set, false},
		{"two epp pods, events", variants["epp-two"].set, false},
		{"one pod, no events", []string{"mode=gateway", "modelServers.kvEventsPort=0"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := loadConfig(t, render(t, "", c.set...))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Routing.ColdRendezvous != c.want {
				t.Errorf("routing.cold_rendezvous %v, want %v", cfg.Routing.ColdRendezvous, c.want)
			}
		})
	}
}
