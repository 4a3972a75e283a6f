// Wrapper module for the csctl-push test helper: pushes cluster-stack release assets with the
// oras-go v2 calls csctl makes (csctl's own module is not served by the module proxy).
module stackflux.io/hack/tools/csctl-push

go 1.26.0

require (
	github.com/opencontainers/image-spec v1.1.1
	oras.land/oras-go/v2 v2.7.0
)

require (
	github.com/opencontainers/go-digest v1.0.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
)
