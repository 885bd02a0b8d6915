package scheduler

// The cost of PreFilter's offer on 1,000 nodes (docs/performance.md).

import (
	"fmt"
	"testing"

	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

func BenchmarkOfferOver1000Nodes(b *testing.B) {
	nodes := make([]fwk.NodeInfo, 1000)
	for i := range nodes {
		nodes[i] = node(fmt.Sprintf("n%04d", i), nil)
	}
	pod := gpuPod("p", 1)
	for b.Loop() {
		affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
		req := requestOf(pod)
		for _, info := range nodes {
			offerable(klog.Background(), pod, affinity, req, info)
		}
	}
}
