//go:build tools

// Package tools pins KWOK, which plays the kubelets of the test clusters' simulated nodes.
// It lives in its own module because KWOK resolves its own k8s.io/* versions (no replaces).
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
