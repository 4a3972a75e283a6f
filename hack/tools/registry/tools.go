//go:build tools

// Keeps the registry command in this module's graph so `go mod tidy` pins its dependencies.
package tools

import _ "github.com/distribution/distribution/v3/cmd/registry"
