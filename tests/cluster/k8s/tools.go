//go:build tools

// Package tools pins the upstream commands the test clusters run, so that `go mod tidy`
// keeps them in go.mod and go.sum. Nothing here is berth's code: build.sh builds these
// packages from the module cache.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
