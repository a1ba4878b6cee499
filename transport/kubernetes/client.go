package kubernetes

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"k8s.io/client-go/dynamic"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// NamespaceFile holds the namespace of the pod a service account token is
// mounted in.
const NamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Namespace returns the pool's namespace: configured when set, else the
// gateway pod's own (read with readFile from NamespaceFile), else
// "default", as llm-d's --pool-namespace defaults.
func Namespace(configured string, readFile func(string) ([]byte, error)) string {
	if configured != "" {
		return configured
	}
	if b, err := readFile(NamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return "default"
}

// ErrNoConfig is RESTConfig's error outside a cluster when no kubeconfig
// is given.
var ErrNoConfig = errors.New("no kubeconfig: not in a cluster, and neither discovery.kubernetes.kubeconfig nor $KUBECONFIG is set")

// RESTConfig returns how to reach the API: the kubeconfig file when one is
// given, else the in-cluster service account, else the files $KUBECONFIG
// (kubeconfigEnv, the caller's) lists.
func RESTConfig(kubeconfig, kubeconfigEnv string) (*rest.Config, error) {
	if kubeconfig == "" {
		c, err := rest.InClusterConfig()
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, rest.ErrNotInCluster) {
			return nil, fmt.Errorf("in-cluster config: %w", err)
		}
		if kubeconfigEnv == "" {
			return nil, ErrNoConfig
		}
	}
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig, Precedence: filepath.SplitList(kubeconfigEnv)}
	c, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return c, nil
}

// Clients returns the typed and dynamic clients for c.
func Clients(c *rest.Config) (k8s.Interface, dynamic.Interface, error) {
	cs, err := k8s.NewForConfig(c)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(c)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes dynamic client: %w", err)
	}
	return cs, dyn, nil
}
