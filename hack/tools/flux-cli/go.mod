// Pins the Flux distribution whose `flux` CLI (cmd/flux) the test environment builds. No code
// here: hack/build-testenv.sh copies the module from the module cache into a writable folder,
// adds placeholder install manifests under cmd/flux/manifests/ (generated at Flux's release
// time, absent from the module) and builds there with flux2's own go.mod and go.sum. Not tidied
// (tidy would drop the requirement, as nothing imports it).
module stackflux.io/hack/tools/flux-cli

go 1.26.0

require github.com/fluxcd/flux2/v2 v2.9.5
