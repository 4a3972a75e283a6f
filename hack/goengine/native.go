//go:build !wasip1

// goengine-native: the same operations as goengine.wasm, as a CLI for the differential tests:
// one JSON request on stdin, one JSON response on stdout. Optional argument: max output bytes.
package main

import (
	"os"
	"strconv"
)

func main() {
	limit := 0
	if len(os.Args) > 1 {
		limit, _ = strconv.Atoi(os.Args[1])
	}
	in, err := readAll(os.Stdin)
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	os.Stdout.Write(handle(in, limit))
}
