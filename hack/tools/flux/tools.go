//go:build tools

// Package tools pins the Flux controllers the test environment builds.
package tools

import (
	_ "github.com/fluxcd/kustomize-controller"
	_ "github.com/fluxcd/source-controller"
)
