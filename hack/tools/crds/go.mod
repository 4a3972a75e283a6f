// Pins the Cluster API release whose CRDs (config/crd/bases) the test environment applies
// from the module cache. No code is built from it.
module stackflux.io/hack/tools/crds

go 1.26.0

require sigs.k8s.io/cluster-api v1.14.2
