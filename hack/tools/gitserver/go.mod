module stackflux.io/hack/tools/gitserver

go 1.26.0
