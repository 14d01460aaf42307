//go:build tools

// Package tools pins Flux's source-controller, built by tests/cluster/build-flux.sh from the
// module cache; nothing here is berth's code.
package tools

import _ "github.com/fluxcd/source-controller"
