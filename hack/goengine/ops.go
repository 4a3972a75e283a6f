// The operations stackflux needs exactly as the Go tools do them: each runs the reference
// code itself (Go's text/template with CSO's and Helm's function maps, Helm's chart loader and
// install action as `helm template` drives them, sigs.k8s.io/yaml), so stackflux gets the same
// bytes CSO and `helm template` produce. One request in, one response out, both JSON; the same
// code is built as a WebAssembly reactor (wasm.go) and as a native CLI (native.go) for the
// differential tests.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"text/template"
	"time"

	masterminds "github.com/Masterminds/sprig/v3"
	slimsprig "github.com/go-task/slim-sprig"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/ignore"
	"helm.sh/helm/v3/pkg/releaseutil"
	kubejson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

type request struct {
	Op string `json:"op"`
	// goTemplate
	Name    string          `json:"name,omitempty"`
	Text    string          `json:"text,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	Funcs   string          `json:"funcs,omitempty"`
	Options []string        `json:"options,omitempty"`
	// helmTemplate
	Files        map[string][]byte `json:"files,omitempty"`
	Values       json.RawMessage   `json:"values,omitempty"`
	ValuesYaml   []string          `json:"valuesYaml,omitempty"`
	ReleaseName  string            `json:"releaseName,omitempty"`
	Namespace    string            `json:"namespace,omitempty"`
	KubeVersion  string            `json:"kubeVersion,omitempty"`
	IncludeCrds  bool              `json:"includeCrds,omitempty"`
	ChartVersion string            `json:"chartVersion,omitempty"`
}

type manifest struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	Hook    bool   `json:"hook,omitempty"`
}

type response struct {
	Ok        bool              `json:"ok"`
	Error     string            `json:"error,omitempty"`
	Limit     string            `json:"limit,omitempty"`
	Output    *string           `json:"output,omitempty"`
	Manifests []manifest        `json:"manifests,omitempty"`
	Stdout    *string           `json:"stdout,omitempty"`
	Documents []json.RawMessage `json:"documents,omitempty"`
}

// handle answers one request; a response longer than maxOutput bytes (0: no limit) becomes an
// error before anyone copies it.
func handle(in []byte, maxOutput int) []byte {
	var req request
	var res response
	if err := json.Unmarshal(in, &req); err != nil {
		res = response{Error: "goengine: bad request: " + err.Error()}
	} else {
		switch req.Op {
		case "goTemplate":
			res = goTemplate(&req)
		case "helmTemplate":
			res = helmTemplate(&req)
		case "parseYaml":
			res = parseYaml(&req)
		default:
			res = response{Error: fmt.Sprintf("goengine: unknown op %q", req.Op)}
		}
	}
	out, err := json.Marshal(res)
	if err != nil {
		out, _ = json.Marshal(response{Error: "goengine: cannot encode the response: " + err.Error()})
	}
	if maxOutput > 0 && len(out) > maxOutput {
		out, _ = json.Marshal(response{Limit: "output", Error: fmt.Sprintf("goengine: output of %d bytes is over the limit of %d bytes", len(out), maxOutput)})
	}
	return out
}

func fail(err error) response { return response{Error: err.Error()} }

// goTemplate is CSO's buildTemplateFromClusterAddonValues: template.New(name).Funcs(
// sprig.TxtFuncMap()).Parse(text).Execute(data), with the data decoded as the Kubernetes client
// decodes objects (whole numbers int64, others float64), so values print as they do in CSO.
// funcs "cso" (default) is go-task/slim-sprig at CSO's pin; "sprig" is Masterminds/sprig at
// Helm's pin. options are passed to template.Option (CSO passes none).
func goTemplate(req *request) response {
	funcs := template.FuncMap(slimsprig.TxtFuncMap())
	switch req.Funcs {
	case "", "cso":
	case "sprig":
		funcs = masterminds.TxtFuncMap()
	default:
		return response{Error: fmt.Sprintf("goengine: unknown function map %q (cso or sprig)", req.Funcs)}
	}
	var data interface{}
	if len(req.Data) > 0 {
		if err := kubejson.Unmarshal(req.Data, &data); err != nil {
			return response{Error: "goengine: bad template data: " + err.Error()}
		}
	}
	var tmpl *template.Template
	var err error
	func() {
		// Option panics on an unknown option: report it as an error instead.
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("goengine: %v", r)
			}
		}()
		tmpl = template.New(req.Name).Funcs(funcs).Option(req.Options...)
	}()
	if err != nil {
		return fail(err)
	}
	if tmpl, err = tmpl.Parse(req.Text); err != nil {
		return fail(err)
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, data); err != nil {
		return fail(err)
	}
	s := out.String()
	return response{Ok: true, Output: &s}
}

// helmTemplate prints what `helm template <release> <chart-dir> --namespace <ns>
// [--include-crds] [--kube-version <v>] [-f values...]` prints (cmd/helm/template.go and
// runInstall in cmd/helm/install.go, Helm v3.19): the chart is loaded as loader.LoadDir loads a
// directory, then rendered by action.Install in client-only dry-run mode.
func helmTemplate(req *request) response {
	chrt, err := loadChartFiles(req.Files)
	if err != nil {
		return fail(err)
	}
	if req.ChartVersion != "" {
		// csctl writes the release version into Chart.yaml before packaging.
		chrt.Metadata.Version = req.ChartVersion
		if err := chrt.Validate(); err != nil {
			return fail(err)
		}
	}
	vals, err := mergeValues(req)
	if err != nil {
		return fail(err)
	}
	switch chrt.Metadata.Type {
	case "", "application":
	default:
		return response{Error: fmt.Sprintf("%s charts are not installable", chrt.Metadata.Type)}
	}
	if deps := chrt.Metadata.Dependencies; deps != nil {
		if err := checkDependencies(chrt, deps); err != nil {
			// `--dependency-update` would download here: the engine has no network, a
			// release must vendor its subcharts under charts/.
			return response{Error: "An error occurred while checking for chart dependencies. You may need to run `helm dependency build` to fetch missing dependencies: " + err.Error()}
		}
	}
	rel, err := render(chrt, vals, req)
	if err != nil {
		if rel != nil {
			return response{Error: fmt.Sprintf("%s\n\nUse --debug flag to render out invalid YAML", err)}
		}
		return fail(err)
	}
	var stdout bytes.Buffer
	fmt.Fprintln(&stdout, strings.TrimSpace(rel.Manifest))
	for _, h := range rel.Hooks {
		fmt.Fprintf(&stdout, "---\n# Source: %s\n%s\n", h.Path, h.Manifest)
	}
	manifests, err := splitReleaseManifest(rel.Manifest, chrt, req.IncludeCrds)
	if err != nil {
		return fail(err)
	}
	for _, h := range rel.Hooks {
		manifests = append(manifests, manifest{Path: h.Path, Content: h.Manifest, Hook: true})
	}
	s := stdout.String()
	return response{Ok: true, Manifests: manifests, Stdout: &s}
}

// splitReleaseManifest takes apart what action.renderResources wrote: each entry is
// "---\n# Source: <path>\n<content>\n", CRD files first (verbatim, they may hold "---"
// themselves), then the sorted manifests (split at "---" by releaseutil, so their content
// never holds "\n---").
func splitReleaseManifest(all string, chrt *chart.Chart, includeCrds bool) ([]manifest, error) {
	var out []manifest
	rest := all
	if includeCrds {
		for _, crd := range chrt.CRDObjects() {
			entry := fmt.Sprintf("---\n# Source: %s\n%s\n", crd.Filename, string(crd.File.Data))
			if !strings.HasPrefix(rest, entry) {
				return nil, fmt.Errorf("goengine: rendered manifest does not start with CRD %s", crd.Filename)
			}
			out = append(out, manifest{Path: crd.Filename, Content: string(crd.File.Data)})
			rest = rest[len(entry):]
		}
	}
	const head = "---\n# Source: "
	for rest != "" {
		if !strings.HasPrefix(rest, head) {
			return nil, fmt.Errorf("goengine: unexpected rendered manifest layout")
		}
		rest = rest[len(head):]
		nl := strings.IndexByte(rest, '\n')
		if nl < 0 {
			return nil, fmt.Errorf("goengine: unexpected rendered manifest layout")
		}
		name := rest[:nl]
		rest = rest[nl+1:]
		end := strings.Index(rest, "\n"+head)
		if end < 0 {
			end = len(rest) - 1
		}
		out = append(out, manifest{Path: name, Content: rest[:end]})
		rest = rest[end+1:]
	}
	return out, nil
}

// mergeValues is values.Options.MergeValues for -f files: each YAML document parsed as Helm
// parses it (sigs.k8s.io/yaml), merged in order, maps deeply.
func mergeValues(req *request) (map[string]interface{}, error) {
	base := map[string]interface{}{}
	var docs [][]byte
	if len(req.Values) > 0 && string(req.Values) != "null" {
		docs = append(docs, req.Values)
	}
	for _, y := range req.ValuesYaml {
		docs = append(docs, []byte(y))
	}
	for i, doc := range docs {
		current := map[string]interface{}{}
		if err := yaml.Unmarshal(doc, &current); err != nil {
			return nil, fmt.Errorf("failed to parse values %d: %w", i, err)
		}
		base = mergeMaps(base, current)
	}
	return base, nil
}

func mergeMaps(a, b map[string]interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(a))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if v, ok := v.(map[string]interface{}); ok {
			if bv, ok := out[k]; ok {
				if bv, ok := bv.(map[string]interface{}); ok {
					out[k] = mergeMaps(bv, v)
					continue
				}
			}
		}
		out[k] = v
	}
	return out
}

// loadChartFiles is loader.LoadDir over files given in memory (the engine has no file
// system): .helmignore rules plus Helm's defaults, directories walked in lexical order, the
// per-file size limit, a UTF-8 byte order mark dropped, then loader.LoadFiles.
func loadChartFiles(files map[string][]byte) (*chart.Chart, error) {
	rules := ignore.Empty()
	if data, ok := files[ignore.HelmIgnore]; ok {
		r, err := ignore.Parse(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		rules = r
	}
	rules.AddDefaults()

	root := &dirNode{children: map[string]*dirNode{}}
	for name, data := range files {
		clean := path.Clean(name)
		if clean != name || strings.HasPrefix(name, "/") || name == "." || strings.HasPrefix(name, "../") {
			return nil, fmt.Errorf("goengine: chart file name %q is not a clean relative path", name)
		}
		node := root
		parts := strings.Split(name, "/")
		for _, p := range parts[:len(parts)-1] {
			child := node.children[p]
			if child == nil {
				child = &dirNode{children: map[string]*dirNode{}}
				node.children[p] = child
			}
			if child.file {
				return nil, fmt.Errorf("goengine: %q is both a file and a directory", p)
			}
			node = child
		}
		leaf := parts[len(parts)-1]
		if _, dup := node.children[leaf]; dup {
			return nil, fmt.Errorf("goengine: %q is both a file and a directory", name)
		}
		node.children[leaf] = &dirNode{file: true, data: data}
	}
	var loaded []*loader.BufferedFile
	var walk func(prefix string, node *dirNode) error
	walk = func(prefix string, node *dirNode) error {
		names := make([]string, 0, len(node.children))
		for n := range node.children {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			child := node.children[n]
			rel := n
			if prefix != "" {
				rel = prefix + "/" + n
			}
			fi := memInfo{name: n, dir: !child.file, size: int64(len(child.data))}
			if !child.file {
				if rules.Ignore(rel, fi) {
					continue
				}
				if err := walk(rel, child); err != nil {
					return err
				}
				continue
			}
			if rules.Ignore(rel, fi) {
				continue
			}
			if fi.size > loader.MaxDecompressedFileSize {
				return fmt.Errorf("chart file %q is larger than the maximum file size %d", n, loader.MaxDecompressedFileSize)
			}
			loaded = append(loaded, &loader.BufferedFile{Name: rel, Data: bytes.TrimPrefix(child.data, []byte{0xEF, 0xBB, 0xBF})})
		}
		return nil
	}
	if err := walk("", root); err != nil {
		return nil, err
	}
	return loader.LoadFiles(loaded)
}

type dirNode struct {
	file     bool
	data     []byte
	children map[string]*dirNode
}

type memInfo struct {
	name string
	dir  bool
	size int64
}

func (m memInfo) Name() string { return m.name }
func (m memInfo) Size() int64  { return m.size }
func (m memInfo) Mode() fs.FileMode {
	if m.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
func (m memInfo) ModTime() time.Time { return time.Time{} }
func (m memInfo) IsDir() bool        { return m.dir }
func (m memInfo) Sys() any           { return nil }

// parseYaml splits a multi-document stream as Helm does (releaseutil.SplitManifests, in
// document order) and converts each document to JSON as Kubernetes' Go code does
// (sigs.k8s.io/yaml.YAMLToJSON).
func parseYaml(req *request) response {
	split := releaseutil.SplitManifests(req.Text)
	keys := make([]string, 0, len(split))
	for k := range split {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	docs := make([]json.RawMessage, 0, len(keys))
	for i, k := range keys {
		j, err := yaml.YAMLToJSON([]byte(split[k]))
		if err != nil {
			return response{Error: fmt.Sprintf("document %d: %s", i, err)}
		}
		docs = append(docs, j)
	}
	return response{Ok: true, Documents: docs}
}

// readAll is io.ReadAll; kept for the native CLI.
func readAll(r io.Reader) ([]byte, error) { return io.ReadAll(r) }
