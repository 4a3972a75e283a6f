// csctl-push publishes a directory of cluster-stack release assets to an OCI registry with the
// same oras-go v2 calls as csctl's `create --publish` (pkg/cmd/create.go pushReleaseAssets and
// pkg/assetsclient/oci/client.go PushReleaseAssets): each regular file of the directory is added
// to an oras file store with csctl's media type for its name (title annotation = file name),
// packed into an image manifest v1.1 with artifactType application/vnd.scs.cluster-stacks.v1 and
// the given manifest annotations, tagged and copied to the repository. Unlike csctl it does not
// skip a tag that exists: pushing other content under an existing tag moves the tag, which the
// tests need. Credentials come from OCI_USERNAME/OCI_PASSWORD (as csctl reads them), never from
// flags, so they stay out of process listings. Prints {"digest","mediaType","size"} as JSON.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"

	imagev1 "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/file"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/retry"
)

// Copied names and values of csctl's pkg/cmd/mediatype.go.
const (
	clusterStackArtifactType    = "application/vnd.scs.cluster-stacks.v1"
	clusterAddonMediaType       = "application/vnd.scs.cluster-addon.layer.v1.tar+gzip"
	clusterClassMediaType       = "application/vnd.scs.cluster-class.v1.tar+gzip"
	clusterAddonConfigMediaType = "application/vnd.scs.cluster-addon.config.layer.v1+yaml"
	metadataMediaType           = "application/vnd.scs.metadata.layer.v1+yaml"
	nodeImageMediaType          = "application/vnd.scs.node-image.layer.v1.tar+gzip"
	nodeImageConfigMediaType    = "application/vnd.scs.node-image.config.layer.v1+yaml"
	hashesMediaType             = "application/vnd.scs.hashes.layer.v1+yaml"
)

// mediaTypeFor assigns media types by file name in the order csctl's getMediaType (pkg/cmd/utils.go) does.
func mediaTypeFor(name string) string {
	switch name {
	case "clusteraddon.yaml":
		return clusterAddonConfigMediaType
	case "metadata.yaml":
		return metadataMediaType
	case "node-images.yaml":
		return nodeImageConfigMediaType
	case "hashes.json":
		return hashesMediaType
	}
	tgz := strings.HasSuffix(name, ".tgz")
	switch {
	case tgz && strings.Contains(name, "cluster-addon"):
		return clusterAddonMediaType
	case tgz && strings.Contains(name, "cluster-class"):
		return clusterClassMediaType
	case tgz && strings.Contains(name, "node-image"):
		return nodeImageMediaType
	}
	return ""
}

type annotations map[string]string

func (a annotations) String() string { return fmt.Sprint(map[string]string(a)) }

func (a annotations) Set(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return errors.New("want key=value")
	}
	a[k] = v
	return nil
}

func main() {
	repo := flag.String("repository", "", "registry host:port/repository (csctl's OCI_REPOSITORY)")
	tag := flag.String("tag", "", "release tag (csctl names it <provider>-<stack>-<k8s>-<version>)")
	dir := flag.String("dir", "", "directory holding the release assets")
	plainHTTP := flag.Bool("plain-http", false, "talk HTTP instead of HTTPS")
	caFile := flag.String("ca", "", "PEM file of a CA to trust for the registry (besides the system's)")
	ann := annotations{}
	flag.Var(ann, "annotation", "manifest annotation key=value (repeatable; csctl sets kubernetesVersion and hash)")
	flag.Parse()
	if *repo == "" || *tag == "" || *dir == "" {
		fmt.Fprintln(os.Stderr, "usage: csctl-push --repository host/repo --tag TAG --dir DIR [--annotation k=v]... [--plain-http] [--ca FILE]")
		os.Exit(2)
	}
	desc, err := push(context.Background(), *repo, *tag, *dir, *plainHTTP, *caFile, ann)
	if err != nil {
		fmt.Fprintln(os.Stderr, "csctl-push:", err)
		os.Exit(1)
	}
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"digest": desc.Digest, "mediaType": desc.MediaType, "size": desc.Size})
}

func push(ctx context.Context, repoRef, tag, dir string, plainHTTP bool, caFile string, ann map[string]string) (imagev1.Descriptor, error) {
	repository, err := remote.NewRepository(repoRef)
	if err != nil {
		return imagev1.Descriptor{}, fmt.Errorf("repository %s: %w", repoRef, err)
	}
	repository.PlainHTTP = plainHTTP
	client, err := authClient(repository.Reference.Registry, caFile)
	if err != nil {
		return imagev1.Descriptor{}, err
	}
	repository.Client = client

	entries, err := os.ReadDir(dir)
	if err != nil {
		return imagev1.Descriptor{}, fmt.Errorf("reading %s: %w", dir, err)
	}
	store, err := file.New(dir)
	if err != nil {
		return imagev1.Descriptor{}, fmt.Errorf("file store: %w", err)
	}
	defer store.Close()

	// From here on the calls are csctl's PushReleaseAssets.
	layers := []imagev1.Descriptor{}
	for _, entry := range entries {
		if !entry.Type().IsRegular() {
			continue
		}
		desc, err := store.Add(ctx, entry.Name(), mediaTypeFor(entry.Name()), "")
		if err != nil {
			return imagev1.Descriptor{}, fmt.Errorf("adding %s: %w", entry.Name(), err)
		}
		layers = append(layers, desc)
	}
	manifest, err := oras.PackManifest(ctx, store, oras.PackManifestVersion1_1, clusterStackArtifactType, oras.PackManifestOptions{
		Layers:              layers,
		ManifestAnnotations: ann,
	})
	if err != nil {
		return imagev1.Descriptor{}, fmt.Errorf("packing manifest: %w", err)
	}
	if err := store.Tag(ctx, manifest, tag); err != nil {
		return imagev1.Descriptor{}, fmt.Errorf("tagging: %w", err)
	}
	if _, err := oras.Copy(ctx, store, tag, repository, tag, oras.DefaultCopyOptions); err != nil {
		return imagev1.Descriptor{}, fmt.Errorf("copying to %s: %w", repoRef, err)
	}
	return manifest, nil
}

// authClient is csctl's auth.Client with a static credential for the registry, plus an optional CA.
func authClient(registry, caFile string) (*auth.Client, error) {
	client := &auth.Client{
		Credential: auth.StaticCredential(registry, auth.Credential{
			Username: os.Getenv("OCI_USERNAME"),
			Password: os.Getenv("OCI_PASSWORD"),
		}),
	}
	if caFile == "" {
		return client, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading CA: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", caFile)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	client.Client = &http.Client{Transport: retry.NewTransport(transport)}
	return client, nil
}
