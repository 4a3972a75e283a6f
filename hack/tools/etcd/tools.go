//go:build tools

// Package tools pins the etcd server binary the test environment builds.
package tools

import _ "go.etcd.io/etcd/server/v3"
