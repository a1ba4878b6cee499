package kubernetes

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/inferrail/inferrail/transport/discovery"
	"github.com/inferrail/inferrail/transport/kubernetes/inferencev1"
)

// Options configure a Watcher.
type Options struct {
	// Pool is the pool to follow. With a Selector it is made from config
	// (llm-d's --endpoint-selector and --endpoint-target-ports) and no
	// InferencePool is read; without one, the InferencePool named Name in
	// Namespace is watched and gives the selector and target ports.
	Pool Pool
	// Template is what every endpoint shares (scheme, models, caps, KV
	// event ports).
	Template discovery.Template
	// Reporter passes the endpoints on and tells of failures.
	Reporter *discovery.Reporter
	// Logger gets pool changes. Nil discards.
	Logger *slog.Logger
}

// Watcher follows one pool's pods with client-go informers and passes its
// endpoints on through its Reporter. Run is its lifecycle; a Watcher runs
// once.
type Watcher struct {
	client k8s.Interface
	dyn    dynamic.Interface
	o      Options
	log    *slog.Logger
	synced chan struct{}

	// problems are the list and watch failures by resource, and the pool's
	// own ("pool"), each with its likely cause; reported joined.
	mu       sync.Mutex
	problems map[string]string
}

// New returns a watcher of o.Pool through client (pods) and dyn
// (InferencePools; unused for a pool made from config).
func New(client k8s.Interface, dyn dynamic.Interface, o Options) *Watcher {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Watcher{client: client, dyn: dyn, o: o, log: log.With("source", o.Reporter.Name()),
		synced: make(chan struct{}), problems: map[string]string{}}
}

// Synced is closed once the watcher has passed its first set of endpoints
// on.
func (w *Watcher) Synced() <-chan struct{} { return w.synced }

// FromCRD reports whether the pool comes from an InferencePool.
func (o *Options) FromCRD() bool { return len(o.Pool.Selector) == 0 }

// Run watches until ctx ends, then stops its informers and returns.
func (w *Watcher) Run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	podsChanged, poolChanged := make(chan struct{}, 1), make(chan struct{}, 1)
	var pools cache.SharedIndexInformer
	var pool *Pool // the pool in effect; nil before the first valid one
	if w.o.FromCRD() {
		pools = w.poolInformer()
		w.informerRun(ctx, &wg, pools, poolChanged)
	} else {
		p := w.o.Pool
		pool = &p
	}
	pods := w.startPods(ctx, &wg, pool, podsChanged)
	for {
		select {
		case <-ctx.Done():
			pods.stop()
			return
		case <-poolChanged:
			next, ok := w.readPool(pools)
			if !ok {
				continue
			}
			if pool == nil || !maps.Equal(next.Selector, pool.Selector) {
				pods.stop()
				pods = w.startPods(ctx, &wg, &next, podsChanged)
			}
			if pool == nil || !maps.Equal(next.Selector, pool.Selector) || !slices.Equal(next.TargetPorts, pool.TargetPorts) {
				w.log.Info("discovery: pool", "pool", next.Namespace+"/"+next.Name, "selector", next.Selector, "target_ports", next.TargetPorts)
			}
			if next.AppProtocol == inferencev1.AppProtocolH2C && (pool == nil || pool.AppProtocol != next.AppProtocol) {
				// Envoy speaks h2c to the pods in front of an endpoint
				// picker; serve's own proxy speaks HTTP/1.1 to engines.
				w.log.Warn("discovery: the InferencePool's appProtocol is kubernetes.io/h2c; the gateway's own proxy (serve) reaches engines over HTTP/1.1",
					"pool", next.Namespace+"/"+next.Name)
			}
			pool = &next
			w.refresh(pool, pods)
		case <-podsChanged:
			w.refresh(pool, pods)
		}
	}
}

// refresh passes the pool's endpoints among the informer's pods on, once
// the informer has listed them: a partial list would drain pods that
// merely have not arrived.
func (w *Watcher) refresh(pool *Pool, pods *podInformer) {
	if pool == nil || pods == nil || !pods.synced() {
		return
	}
	var list []*corev1.Pod
	for _, obj := range pods.inf.GetStore().List() {
		if p, ok := obj.(*corev1.Pod); ok {
			list = append(list, p)
		}
	}
	w.o.Reporter.Set(pool.Endpoints(list, &w.o.Template))
	select {
	case <-w.synced:
	default:
		close(w.synced)
	}
}

// podInformer is one pod informer, for one selector: a selector edit
// replaces it.
type podInformer struct {
	inf    cache.SharedIndexInformer
	reg    cache.ResourceEventHandlerRegistration
	cancel context.CancelFunc
}

func (p *podInformer) stop() {
	if p != nil {
		p.cancel()
	}
}

func (p *podInformer) synced() bool { return p.reg.HasSynced() }

// startPods starts an informer on the pool's pods (its namespace, its
// selector), which signals changed on every event and once it has synced.
// Nil before there is a pool.
func (w *Watcher) startPods(ctx context.Context, wg *sync.WaitGroup, pool *Pool, changed chan struct{}) *podInformer {
	if pool == nil {
		return nil
	}
	ns, sel := pool.Namespace, labels.SelectorFromSet(pool.Selector).String()
	pods := w.client.CoreV1().Pods(ns)
	lw := w.listWatch("pods", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		o.LabelSelector = sel
		return pods.List(ctx, o)
	}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.LabelSelector = sel
		return pods.Watch(ctx, o)
	})
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	pctx, cancel := context.WithCancel(ctx)
	return &podInformer{inf: inf, reg: w.informerRun(pctx, wg, inf, changed), cancel: cancel}
}

// poolInformer returns an informer on the InferencePool named in the
// options.
func (w *Watcher) poolInformer() cache.SharedIndexInformer {
	res := w.dyn.Resource(inferencev1.GroupVersionResource).Namespace(w.o.Pool.Namespace)
	byName := fields.OneTermEqualSelector("metadata.name", w.o.Pool.Name).String()
	lw := w.listWatch("inferencepools", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		o.FieldSelector = byName
		return res.List(ctx, o)
	}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.FieldSelector = byName
		return res.Watch(ctx, o)
	})
	return cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{})
}

// informerRun adds a handler signalling changed on every event to inf,
// runs inf until ctx ends and signals changed once it has synced; wg joins
// both goroutines.
func (w *Watcher) informerRun(ctx context.Context, wg *sync.WaitGroup, inf cache.SharedIndexInformer, changed chan struct{}) cache.ResourceEventHandlerRegistration {
	signal := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { signal() },
		UpdateFunc: func(any, any) { signal() },
		DeleteFunc: func(any) { signal() },
	})
	if err != nil {
		panic("BUG: kubernetes: a new informer refused a handler: " + err.Error())
	}
	// Failures are reported by listWatch, with their cause; the default
	// handler would log every retry.
	_ = inf.SetWatchErrorHandlerWithContext(func(context.Context, *cache.Reflector, error) {})
	wg.Go(func() { inf.RunWithContext(ctx) })
	wg.Go(func() {
		if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
			signal()
		}
	})
	return reg
}

// readPool returns the InferencePool as the informer holds it, if it is
// there and valid; otherwise it reports why and the last pool stays.
func (w *Watcher) readPool(pools cache.SharedIndexInformer) (Pool, bool) {
	key := w.o.Pool.Namespace + "/" + w.o.Pool.Name
	obj, ok, _ := pools.GetStore().GetByKey(key)
	if !ok {
		if pools.HasSynced() {
			w.problem("pool", fmt.Sprintf("InferencePool %s does not exist", key), nil)
		}
		return Pool{}, false
	}
	u, isU := obj.(*unstructured.Unstructured)
	var p inferencev1.InferencePool
	if !isU {
		w.problem("pool", fmt.Sprintf("InferencePool %s could not be read", key), fmt.Errorf("a %T", obj))
		return Pool{}, false
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
		w.problem("pool", fmt.Sprintf("InferencePool %s could not be decoded; the last valid pool stays", key), err)
		return Pool{}, false
	}
	if err := p.Validate(); err != nil {
		w.problem("pool", fmt.Sprintf("InferencePool %s is invalid; the last valid pool stays", key), err)
		return Pool{}, false
	}
	w.problem("pool", "", nil)
	return poolOf(&p), true
}

// noWatchList is a ListWatch that asks its reflector for list-then-watch,
// not the streaming watch-list: listWatch learns from a List that
// succeeds that access works again.
type noWatchList struct{ *cache.ListWatch }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// listWatch wraps list and watch of resource so that each failure is
// recorded with its likely cause, and each list that succeeds clears it.
func (w *Watcher) listWatch(resource string, list cache.ListWithContextFunc, wat cache.WatchFuncWithContext) cache.ListerWatcher {
	return noWatchList{&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			obj, err := list(ctx, o)
			if ctx.Err() == nil {
				w.problem(resource, w.cause(resource, err), err)
			}
			return obj, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			wi, err := wat(ctx, o)
			if err != nil && ctx.Err() == nil {
				w.problem(resource, w.cause(resource, err), err)
			}
			return wi, err
		},
	}}
}

// cause names the likely reason err failed a list or watch of resource,
// "" for no error.
func (w *Watcher) cause(resource string, err error) string {
	ns := w.o.Pool.Namespace
	switch {
	case err == nil:
		return ""
	case apierrors.IsForbidden(err):
		return fmt.Sprintf("RBAC forbids the gateway to list and watch %s in namespace %s: grant its service account get, list and watch on pods"+
			" (and on inferencepools.inference.networking.k8s.io with pool_name)", resource, ns)
	case apierrors.IsUnauthorized(err):
		return "the Kubernetes API refuses the gateway's credentials (its service account token or kubeconfig)"
	case resource == "inferencepools" && apierrors.IsNotFound(err):
		return "the InferencePool CRD (inference.networking.k8s.io/v1) is not installed; install it, or set endpoint_selector and target_ports"
	default:
		return fmt.Sprintf("the Kubernetes API cannot be reached to list and watch %s", resource)
	}
}

// problem sets (or with an empty cause clears) what is wrong with key, and
// reports every problem joined, or none.
func (w *Watcher) problem(key, cause string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if cause == "" {
		delete(w.problems, key)
	} else {
		if err != nil {
			cause += " (" + err.Error() + ")"
		}
		w.problems[key] = cause
	}
	if len(w.problems) == 0 {
		w.o.Reporter.OK()
		return
	}
	var all []string
	for _, k := range slices.Sorted(maps.Keys(w.problems)) {
		all = append(all, w.problems[k])
	}
	w.o.Reporter.Fail(strings.Join(all, "; "), nil)
}
