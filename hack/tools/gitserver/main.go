// Command gitserver serves bare Git repositories over smart HTTP on loopback by running
// `git http-backend` as CGI (Flux's go-git speaks smart HTTP, not dumb HTTP or git://).
// Optional basic auth protects every repository; POST /-/repos/NAME creates a bare repo.
package main

import (
	"crypto/subtle"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

var repoName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	root := flag.String("root", "", "directory holding the bare repositories")
	user := flag.String("user", "", "basic-auth user (empty: no auth)")
	password := flag.String("password", "", "basic-auth password")
	addrFile := flag.String("addr-file", "", "write the bound address to this file once listening")
	flag.Parse()
	if *root == "" {
		log.Fatal("--root is required")
	}
	backend, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		log.Fatalf("git --exec-path: %v", err)
	}
	cgiHandler := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(backend)), "git-http-backend"),
		Env: []string{
			"GIT_PROJECT_ROOT=" + *root,
			"GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_COUNT=2",
			"GIT_CONFIG_KEY_0=http.receivepack", "GIT_CONFIG_VALUE_0=true",
			"GIT_CONFIG_KEY_1=uploadpack.allowAnySHA1InWant", "GIT_CONFIG_VALUE_1=true",
		},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("POST /-/repos/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimSuffix(r.PathValue("name"), ".git")
		if !repoName.MatchString(name) {
			http.Error(w, "invalid repository name", http.StatusBadRequest)
			return
		}
		dir := filepath.Join(*root, name+".git")
		if _, err := os.Stat(dir); err == nil {
			w.WriteHeader(http.StatusOK)
			return
		}
		out, err := exec.Command("git", "init", "--bare", "--initial-branch=main", dir).CombinedOutput()
		if err != nil {
			http.Error(w, string(out), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	mux.Handle("/", cgiHandler)

	var handler http.Handler = mux
	if *user != "" {
		handler = basicAuth(*user, *password, mux)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile, []byte(ln.Addr().String()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	log.Printf("serving %s on http://%s", *root, ln.Addr())
	log.Fatal(http.Serve(ln, logRequests(handler)))
}

func basicAuth(user, password string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(user)) != 1 ||
			subtle.ConstantTimeCompare([]byte(p), []byte(password)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) { s.status = code; s.ResponseWriter.WriteHeader(code) }

func logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		log.Printf("%s %s %d", r.Method, r.URL.Path, rec.status)
	})
}
