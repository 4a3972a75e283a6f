package main

// Helm's pkg/action (Install.RunWithContext, renderResources, CheckDependencies) pulls in the
// Kubernetes client and storage drivers, which do not build for wasip1. This file is the
// client-only dry-run path of those functions (what `helm template` runs), calling the same
// Helm packages in the same order; the differential tests hold it to the real CLI's output.

import (
	"bytes"
	"fmt"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
)

// rendered is what `helm template` prints from: the manifest text and the hooks.
type rendered struct {
	Manifest string
	Hooks    []*release.Hook
}

// render is Install.RunWithContext with ClientOnly, DryRun, Replace (no name check); a non-nil
// result with an error is a failed render (helm then suggests --debug).
func render(chrt *chart.Chart, vals map[string]interface{}, req *request) (*rendered, error) {
	if err := chartutil.ProcessDependenciesWithMerge(chrt, vals); err != nil {
		return nil, err
	}
	caps := chartutil.DefaultCapabilities.Copy()
	if req.KubeVersion != "" {
		kv, err := chartutil.ParseKubeVersion(req.KubeVersion)
		if err != nil {
			return nil, fmt.Errorf("invalid kube version '%s': %s", req.KubeVersion, err)
		}
		caps.KubeVersion = *kv
	}
	options := chartutil.ReleaseOptions{
		Name:      req.ReleaseName,
		Namespace: req.Namespace,
		Revision:  1,
		IsInstall: true,
	}
	valuesToRender, err := chartutil.ToRenderValuesWithSchemaValidation(chrt, vals, options, caps, false)
	if err != nil {
		return nil, err
	}
	hooks, manifest, err := renderResources(chrt, valuesToRender, caps, req.IncludeCrds)
	rel := &rendered{Manifest: manifest.String(), Hooks: hooks}
	return rel, err
}

// renderResources is Configuration.renderResources without an output directory, post-renderer,
// DNS or cluster access.
func renderResources(ch *chart.Chart, values chartutil.Values, caps *chartutil.Capabilities, includeCrds bool) ([]*release.Hook, *bytes.Buffer, error) {
	hs := []*release.Hook{}
	b := bytes.NewBuffer(nil)
	if ch.Metadata.KubeVersion != "" {
		if !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, caps.KubeVersion.String()) {
			return hs, b, fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", ch.Metadata.KubeVersion, caps.KubeVersion.String())
		}
	}
	var e engine.Engine
	files, err := e.Render(ch, values)
	if err != nil {
		return hs, b, err
	}
	// NOTES.txt is not printed by `helm template`; drop it as Helm does before sorting.
	for k := range files {
		if strings.HasSuffix(k, "NOTES.txt") {
			delete(files, k)
		}
	}
	hs, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		for name, content := range files {
			if strings.TrimSpace(content) == "" {
				continue
			}
			fmt.Fprintf(b, "---\n# Source: %s\n%s\n", name, content)
		}
		return hs, b, err
	}
	if includeCrds {
		for _, crd := range ch.CRDObjects() {
			fmt.Fprintf(b, "---\n# Source: %s\n%s\n", crd.Filename, string(crd.File.Data[:]))
		}
	}
	for _, m := range manifests {
		fmt.Fprintf(b, "---\n# Source: %s\n%s\n", m.Name, m.Content)
	}
	return hs, b, nil
}

// checkDependencies is action.CheckDependencies: every dependency named in Chart.yaml is
// present under charts/.
func checkDependencies(ch *chart.Chart, reqs []*chart.Dependency) error {
	var missing []string
OUTER:
	for _, r := range reqs {
		for _, d := range ch.Dependencies() {
			if d.Name() == r.Name {
				continue OUTER
			}
		}
		missing = append(missing, r.Name)
	}
	if len(missing) > 0 {
		return fmt.Errorf("found in Chart.yaml, but missing in charts/ directory: %s", strings.Join(missing, ", "))
	}
	return nil
}
