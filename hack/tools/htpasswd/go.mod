// Wrapper module for the htpasswd test helper: bcrypt lines for the registry's htpasswd auth.
module stackflux.io/hack/tools/htpasswd

go 1.26.0

require golang.org/x/crypto v0.57.0
