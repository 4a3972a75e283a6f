//go:build tools

// Pins the helm CLI (same module and version as the engine) that the differential tests run.
package main

import _ "helm.sh/helm/v3/cmd/helm"
