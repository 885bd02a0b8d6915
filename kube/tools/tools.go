//go:build tools

// Package tools records the Kubernetes commands the test control plane builds from this
// module (scripts/install-k8s-test-binaries), so that `go mod tidy` keeps their
// dependencies in go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
