package kubernetes

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/transport/discovery"
	"github.com/inferrail/inferrail/transport/kubernetes/inferencev1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const ns = "inference"

// sink records every set and failure on buffered channels.
type sink struct {
	sets  chan []fleet.Endpoint
	fails chan string // "" for recovered
}

func newSink() *sink {
	return &sink{sets: make(chan []fleet.Endpoint, 256), fails: make(chan string, 256)}
}

func (s *sink) SetEndpoints(_ string, eps []fleet.Endpoint) { s.sets <- eps }

func (s *sink) SourceFailing(_ string, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	s.fails <- msg
}

// set waits for a set whose rendering (see render) is want, skipping
// others, for 5s.
func (s *sink) set(t testing.TB, want string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	last := "none"
	for {
		select {
		case eps := <-s.sets:
			if last = render(eps); last == want {
				return
			}
		case <-deadline:
			t.Fatalf("endpoints: want %s, last set %s", want, last)
		}
	}
}

// next checks that the next set, within 5s, renders as want.
func (s *sink) next(t testing.TB, want string) {
	t.Helper()
	select {
	case eps := <-s.sets:
		if got := render(eps); got != want {
			t.Fatalf("next endpoints %s, want %s", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no endpoints within 5s; want %s", want)
	}
}

// failure waits for a failure report containing want ("" for a
// recovery), for 5s.
func (s *sink) failure(t testing.TB, want string) string {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case msg := <-s.fails:
			if want == "" && msg == "" || want != "" && strings.Contains(msg, want) {
				return msg
			}
		case <-deadline:
			t.Fatalf("no failure report with %q within 5s", want)
		}
	}
}

// quiet checks that no set arrives for a while.
func (s *sink) quiet(t testing.TB) {
	t.Helper()
	select {
	case eps := <-s.sets:
		t.Fatalf("unexpected set %s", render(eps))
	case <-time.After(100 * time.Millisecond):
	}
}

// render writes endpoints as "id url role; …".
func render(eps []fleet.Endpoint) string {
	var out []string
	for _, ep := range eps {
		out = append(out, strings.TrimSpace(ep.ID+" "+ep.URL+" "+ep.Labels["llm-d.ai/role"]))
	}
	return "[" + strings.Join(out, "; ") + "]"
}

func pod(name, ip string, ready bool, labels map[string]string) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Status: corev1.PodStatus{PodIP: ip, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: status}}},
	}
}

func poolObject(name string, selector map[string]string, ports ...int32) *unstructured.Unstructured {
	p := &inferencev1.InferencePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: inferencev1.Group + "/" + inferencev1.Version, Kind: inferencev1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       inferencev1.InferencePoolSpec{Selector: inferencev1.LabelSelector{MatchLabels: selector}},
	}
	for _, port := range ports {
		p.Spec.TargetPorts = append(p.Spec.TargetPorts, inferencev1.Port{Number: port})
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		panic(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// harness runs a watcher on fake clientsets until the test ends.
type harness struct {
	cs   *fake.Clientset
	dyn  *dynamicfake.FakeDynamicClient
	sink *sink
	set  *metrics.Set
	w    *Watcher
}

// run starts a watcher of pool on fake clientsets holding pods and pools.
func run(t *testing.T, pool Pool, pods []*corev1.Pod, pools ...runtime.Object) *harness {
	t.Helper()
	h := newHarness(pool, pods, pools...)
	h.start(t)
	return h
}

// newHarness builds the clientsets and the watcher, not started yet (a
// test adds reactors first).
func newHarness(pool Pool, pods []*corev1.Pod, pools ...runtime.Object) *harness {
	var objs []runtime.Object
	for _, p := range pods {
		objs = append(objs, p)
	}
	h := &harness{cs: fake.NewClientset(objs...), sink: newSink(), set: metrics.NewSet()}
	h.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{inferencev1.GroupVersionResource: inferencev1.ListKind}, pools...)
	pool.Namespace = ns
	h.w = New(h.cs, h.dyn, Options{Pool: pool, Template: discovery.Template{Scheme: "http", Models: []string{"m"}, MaxConcurrency: 8},
		Reporter: discovery.NewReporter("kubernetes", h.sink, nil, h.set)})
	return h
}

// start runs the watcher until the test ends.
func (h *harness) start(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func (h *harness) update(t *testing.T, p *corev1.Pod) {
	t.Helper()
	if _, err := h.cs.CoreV1().Pods(ns).Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) create(t *testing.T, p *corev1.Pod) {
	t.Helper()
	if _, err := h.cs.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) updatePool(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	if _, err := h.dyn.Resource(inferencev1.GroupVersionResource).Namespace(ns).Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

var (
	vllm   = map[string]string{"app": "vllm"}
	decode = map[string]string{"app": "vllm", "llm-d.ai/role": "decode"}
)

// TestPodsJoinAndLeave, on a pool made from config: only Ready pods with
// an IP, no deletion timestamp and the selector's labels count; one
// endpoint per target port; a pod becoming Ready joins; one being deleted
// (timestamp set) or deleted leaves; labels reach the endpoints.
func TestPodsJoinAndLeave(t *testing.T) {
	h := run(t, Pool{Name: "flags", Selector: vllm, TargetPorts: []int32{8000, 8001}}, []*corev1.Pod{
		pod("a", "10.0.0.1", true, decode),
		pod("b", "10.0.0.2", false, vllm),
		pod("c", "10.0.0.3", true, map[string]string{"app": "other"}),
		pod("d", "", true, vllm),
	})
	h.sink.set(t, "[a-rank-0 http://10.0.0.1:8000 decode; a-rank-1 http://10.0.0.1:8001 decode]")
	select {
	case <-h.w.Synced(): // marked just after the first set is handed over
	case <-time.After(5 * time.Second):
		t.Fatal("not synced after the first set")
	}

	h.update(t, pod("b", "10.0.0.2", true, vllm))
	h.sink.set(t, "[a-rank-0 http://10.0.0.1:8000 decode; a-rank-1 http://10.0.0.1:8001 decode; b-rank-0 http://10.0.0.2:8000; b-rank-1 http://10.0.0.2:8001]")

	gone := pod("a", "10.0.0.1", true, decode)
	now := metav1.Now()
	gone.DeletionTimestamp = &now
	h.update(t, gone)
	h.sink.set(t, "[b-rank-0 http://10.0.0.2:8000; b-rank-1 http://10.0.0.2:8001]")

	if err := h.cs.CoreV1().Pods(ns).Delete(context.Background(), "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.sink.set(t, "[]")

	// An update that changes nothing the endpoints show passes nothing on.
	h.create(t, pod("e", "10.0.0.5", true, vllm))
	h.sink.set(t, "[e-rank-0 http://10.0.0.5:8000; e-rank-1 http://10.0.0.5:8001]")
	e := pod("e", "10.0.0.5", true, vllm)
	e.Status.Conditions[0].LastProbeTime = metav1.Now()
	h.update(t, e)
	h.sink.quiet(t)
}

// TestPodLabels: a pod whose labels leave the selector leaves, one whose
// labels come to match joins, and a role label change reaches the
// endpoint's labels.
func TestPodLabels(t *testing.T) {
	h := run(t, Pool{Name: "flags", Selector: vllm, TargetPorts: []int32{8000}}, []*corev1.Pod{
		pod("a", "10.0.0.1", true, vllm), pod("b", "10.0.0.2", true, nil)})
	h.sink.set(t, "[a-rank-0 http://10.0.0.1:8000]")
	h.update(t, pod("a", "10.0.0.1", true, decode))
	h.sink.set(t, "[a-rank-0 http://10.0.0.1:8000 decode]")
	h.update(t, pod("a", "10.0.0.1", true, map[string]string{"app": "moved", "llm-d.ai/role": "decode"}))
	h.sink.set(t, "[]")
	h.update(t, pod("b", "10.0.0.2", true, map[string]string{"app": "vllm", "llm-d.ai/role": "prefill"}))
	h.sink.set(t, "[b-rank-0 http://10.0.0.2:8000 prefill]")
}

// TestActivePortsAnnotation: llm-d.ai/active-ports (or the legacy name)
// narrows a pod's endpoints to the ports it lists, ranks keeping their
// index in targetPorts; removing it restores every port.
func TestActivePortsAnnotation(t *testing.T) {
	a := pod("a", "10.0.0.1", true, vllm)
	a.Annotations = map[string]string{ActivePortsAnnotation: "8001, 8002"}
	b := pod("b", "10.0.0.2", true, vllm)
	b.Annotations = map[string]string{LegacyActivePortsAnnotation: "8000"}
	h := run(t, Pool{Name: "flags", Selector: vllm, TargetPorts: []int32{8000, 8001, 8002}}, []*corev1.Pod{a, b})
	h.sink.set(t, "[a-rank-1 http://10.0.0.1:8001; a-rank-2 http://10.0.0.1:8002; b-rank-0 http://10.0.0.2:8000]")
	a = a.DeepCopy()
	a.Annotations = nil
	h.update(t, a)
	h.sink.set(t, "[a-rank-0 http://10.0.0.1:8000; a-rank-1 http://10.0.0.1:8001; a-rank-2 http://10.0.0.1:8002; b-rank-0 http://10.0.0.2:8000]")
}

func TestActivePorts(t *testing.T) {
	f := func(ann map[string]string, want string) {
		t.Helper()
		set, ok := ActivePorts(ann)
		got := "none"
		if ok {
			got = fmt.Sprint(set)
		}
		if got != want {
			t.Errorf("%v: got %s, want %s", ann, got, want)
		}
	}
	f(nil, "none")
	f(map[string]string{"other": "1"}, "none")
	f(map[string]string{ActivePortsAnnotation: "8000,8001"}, "map[8000:true 8001:true]")
	f(map[string]string{ActivePortsAnnotation: " 8000 , x, 0, 70000,"}, "map[8000:true]")
	f(map[string]string{ActivePortsAnnotation: ""}, "map[]")
	f(map[string]string{ActivePortsAnnotation: "8000", LegacyActivePortsAnnotation: "8001"}, "map[8000:true]")
	f(map[string]string{LegacyActivePortsAnnotation: "8001"}, "map[8001:true]")
}

// FuzzActivePorts: no annotation panics, and every port it yields is one.
func FuzzActivePorts(f *testing.F) {
	for _, s := range []string{"8000,8001", " 8000 , x", "", ",,,", "-1,65536,65535", "0x50"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, ok := ActivePorts(map[string]string{ActivePortsAnnotation: s})
		if !ok {
			t.Fatal("annotation not seen")
		}
		for p := range set {
			if p < 1 || p > 65535 {
				t.Fatalf("port %d from %q", p, s)
			}
		}
	})
}

// TestPoolFromCRD: the InferencePool gives the selector and target ports;
// a selector edit re-filters the pods, a target port edit re-ranks them,
// an invalid edit is refused with a warning and the last valid pool
// stays, and fixing it recovers.
func TestPoolFromCRD(t *testing.T) {
	h := run(t, Pool{Name: "llama"}, []*corev1.Pod{
		pod("a", "10.0.0.1", true, vllm), pod("b", "10.0.0.2", true, map[string]string{"app": "next"})},
		poolObject("llama", vllm, 8000), poolObject("other", map[string]string{"app": "next"}, 9000))
	h.sink.next(t, "[a-rank-0 http://10.0.0.1:8000]")

	// The pods of the new selector replace the old ones at once: never an
	// empty set while the new informer lists them.
	h.updatePool(t, poolObject("llama", map[string]string{"app": "next"}, 8000))
	h.sink.next(t, "[b-rank-0 http://10.0.0.2:8000]")

	h.updatePool(t, poolObject("llama", map[string]string{"app": "next"}, 8000, 8001))
	h.sink.set(t, "[b-rank-0 http://10.0.0.2:8000; b-rank-1 http://10.0.0.2:8001]")

	h.updatePool(t, poolObject("llama", map[string]string{"app": "next"})) // no target ports: invalid
	msg := h.sink.failure(t, "InferencePool inference/llama is invalid")
	if !strings.Contains(msg, "targetPorts") {
		t.Errorf("failure %q does not say what is invalid", msg)
	}
	h.sink.quiet(t)
	h.updatePool(t, poolObject("llama", vllm, 8001))
	h.sink.failure(t, "")
	h.sink.set(t, "[a-rank-0 http://10.0.0.1:8001]")

	// Edits of another pool change nothing.
	h.updatePool(t, poolObject("other", vllm, 7000))
	h.sink.quiet(t)
}

// TestPoolMissing: a pool that does not exist is said, with nothing
// passed on; once created it is followed.
func TestPoolMissing(t *testing.T) {
	h := run(t, Pool{Name: "llama"}, []*corev1.Pod{pod("a", "10.0.0.1", true, vllm)})
	h.sink.failure(t, "InferencePool inference/llama does not exist")
	if _, err := h.dyn.Resource(inferencev1.GroupVersionResource).Namespace(ns).Create(context.Background(),
		poolObject("llama", vllm, 8000), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.sink.set(t, "[a-rank-0 http://10.0.0.1:8000]")
	h.sink.failure(t, "")
}

// TestForbidden: a list that RBAC forbids is said once, naming RBAC, with
// inferrail_discovery_failing at 1; once allowed the pods are listed and
// the failure clears.
func TestForbidden(t *testing.T) {
	var allowed atomic.Bool
	h := newHarness(Pool{Name: "flags", Selector: vllm, TargetPorts: []int32{8000}}, []*corev1.Pod{pod("a", "10.0.0.1", true, vllm)})
	h.cs.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if allowed.Load() {
			return false, nil, nil
		}
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", fmt.Errorf("no RBAC"))
	})
	h.start(t)
	msg := h.sink.failure(t, "RBAC forbids the gateway to list and watch pods in namespace inference")
	if !strings.Contains(msg, "get, list and watch on pods") {
		t.Errorf("failure %q does not say what to grant", msg)
	}
	var page strings.Builder
	h.set.WritePrometheus(&page)
	if !strings.Contains(page.String(), `inferrail_discovery_failing{source="kubernetes"} 1`) {
		t.Errorf("metrics:\n%s", page.String())
	}
	allowed.Store(true)
	h.sink.set(t, "[a-rank-0 http://10.0.0.1:8000]")
	h.sink.failure(t, "")
}

// TestCRDMissing: listing InferencePools where the CRD is not installed
// names that cause.
func TestCRDMissing(t *testing.T) {
	h := newHarness(Pool{Name: "llama"}, nil)
	h.dyn.PrependReactor("list", "inferencepools", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: inferencev1.Group, Resource: inferencev1.Resource}, "")
	})
	h.start(t)
	h.sink.failure(t, "the InferencePool CRD (inference.networking.k8s.io/v1) is not installed")
}

// TestRankEvents: each rank of a pod follows its own KV event stream, the
// base ports plus the rank, as vLLM offsets a data-parallel rank's
// publisher (and replay) port.
func TestRankEvents(t *testing.T) {
	p := Pool{Selector: vllm, TargetPorts: []int32{8000, 8001}}
	eps := p.Endpoints([]*corev1.Pod{pod("a", "10.0.0.1", true, vllm)},
		&discovery.Template{Scheme: "http", KVEventsPort: 5557, KVEventsReplayPort: 5600})
	var got []string
	for _, ep := range eps {
		got = append(got, ep.ID+" "+ep.Events.Endpoint+" "+ep.Events.Replay)
	}
	if want := "[a-rank-0 tcp://10.0.0.1:5557 tcp://10.0.0.1:5600 a-rank-1 tcp://10.0.0.1:5558 tcp://10.0.0.1:5601]"; fmt.Sprint(got) != want {
		t.Fatalf("streams %v, want %s", got, want)
	}
}

// logLines collects log output, for concurrent writes.
type logLines struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPoolH2C: a pool whose appProtocol is h2c is followed, with a warning
// that serve's own proxy speaks HTTP/1.1 to engines.
func TestPoolH2C(t *testing.T) {
	u := poolObject("llama", vllm, 8000)
	if err := unstructured.SetNestedField(u.Object, string(inferencev1.AppProtocolH2C), "spec", "appProtocol"); err != nil {
		t.Fatal(err)
	}
	h := newHarness(Pool{Name: "llama"}, []*corev1.Pod{pod("a", "10.0.0.1", true, vllm)}, u)
	logs := &logLines{}
	h.w = New(h.cs, h.dyn, Options{Pool: Pool{Name: "llama", Namespace: ns}, Template: discovery.Template{Scheme: "http"},
		Reporter: discovery.NewReporter("kubernetes", h.sink, nil, h.set), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	h.start(t)
	h.sink.set(t, "[a-rank-0 http://10.0.0.1:8000]")
	if !strings.Contains(logs.String(), "kubernetes.io/h2c") {
		t.Errorf("no h2c warning:\n%s", logs.String())
	}
}
