// Command toposched-k8s-lifecycle follows the pods `toposched serve --k8s-extender` placed
// and releases each job's GPUs in serve when all its pods have finished or been deleted, and
// holds the GPUs of pods placed by someone else while they run, and marks in serve the nodes
// that may take no new jobs (cordoned, NotReady, tainted, deleted) (package lifecycle;
// docs/kubernetes.md "Releasing finished jobs").
//
//	toposched-k8s-lifecycle --toposched http://127.0.0.1:7070 [--toposched-token-file F] \
//	    [--kubeconfig F]
//
// Without --kubeconfig it uses the in-cluster service account (RBAC: list and watch pods and
// nodes, deploy/kubernetes/rbac.yaml).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/toposched/toposched/kube/lifecycle"
)

func main() {
	klog.InitFlags(nil)
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file (default: the in-cluster service account)")
	toposchedURL := flag.String("toposched", "", "toposched serve's base URL, e.g. http://127.0.0.1:7070 (required)")
	tokenFile := flag.String("toposched-token-file", "", "bearer token for serve's DELETE and PUT (its --token-file)")
	workers := flag.Int("workers", 2, "jobs released in parallel")
	orphanGrace := flag.Duration("orphan-grace", lifecycle.DefaultOrphanGrace,
		"release a Kubernetes job (id k8s:...) serve holds once no live pod has belonged to it this long "+
			"(pods deleted while this controller was down); keep it above serve's --k8s-reservation-timeout; 0: off")
	holdExternal := flag.Bool("hold-external-pods", true,
		"hold in serve the GPUs of bound pods toposched did not place (no toposched.io/job annotation), as jobs k8s-external:NAMESPACE:NAME")
	gpuResource := flag.String("gpu-resource", lifecycle.DefaultGPUResource, "the extended resource GPUs are requested as")
	tolerateTaints := flag.String("tolerate-taints", strings.Join(lifecycle.DefaultTolerateTaints, ","),
		"comma-separated taint keys that do not make a node unavailable in serve (GPU pods tolerate them); empty: none")
	flag.Parse()
	if *toposchedURL == "" || flag.NArg() != 0 || *workers < 1 || *orphanGrace < 0 {
		fmt.Fprintln(os.Stderr, "toposched-k8s-lifecycle: error: give --toposched URL (and no arguments); --workers >= 1; --orphan-grace >= 0")
		flag.Usage()
		os.Exit(2)
	}
	config, err := restConfig(*kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "toposched-k8s-lifecycle: error: %v\n", err)
		os.Exit(1)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		fmt.Fprintf(os.Stderr, "toposched-k8s-lifecycle: error: %v\n", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c := lifecycle.New(client, lifecycle.NewHTTPToposched(*toposchedURL, *tokenFile))
	c.OrphanGrace = *orphanGrace
	c.HoldExternalPods = *holdExternal
	c.GPUResource = corev1.ResourceName(*gpuResource)
	c.TolerateTaints = nil
	for _, key := range strings.Split(*tolerateTaints, ",") {
		if key = strings.TrimSpace(key); key != "" {
			c.TolerateTaints = append(c.TolerateTaints, key)
		}
	}
	if err := c.Run(ctx, *workers); err != nil {
		fmt.Fprintf(os.Stderr, "toposched-k8s-lifecycle: error: %v\n", err)
		os.Exit(1)
	}
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.BuildConfigFromFlags("", kubeconfig)
}
