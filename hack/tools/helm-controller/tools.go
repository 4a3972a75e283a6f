//go:build tools

// Package tools pins the Flux helm-controller the test environment builds.
package tools

import _ "github.com/fluxcd/helm-controller"
