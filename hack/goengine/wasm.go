//go:build wasip1

// goengine.wasm: a WASI reactor (built with -buildmode=c-shared), instantiated once per
// process and called many times. Protocol, all lengths in bytes:
//
//	ptr = alloc(len)            Go allocates a request buffer and keeps it alive
//	(host writes the JSON request at ptr)
//	res = call(ptr, len, max)   runs it, frees the request; res = resPtr<<32 | resLen
//	(host reads the JSON response at resPtr)
//	free(resPtr)                releases the response
//
// A response over max bytes (0: no limit) is replaced by a short error response inside Go,
// before the host copies anything.
package main

import "unsafe"

func main() {}

// pinned keeps buffers the host holds pointers to reachable for Go's garbage collector.
var pinned = map[uintptr][]byte{}

//go:wasmexport alloc
func alloc(size uint32) uint32 {
	buf := make([]byte, size+1) // +1: a zero-length request still has an address
	ptr := uintptr(unsafe.Pointer(&buf[0]))
	pinned[ptr] = buf
	return uint32(ptr)
}

//go:wasmexport free
func free(ptr uint32) {
	delete(pinned, uintptr(ptr))
}

//go:wasmexport call
func call(ptr, size, maxOutput uint32) uint64 {
	req := pinned[uintptr(ptr)]
	delete(pinned, uintptr(ptr))
	if req == nil || uint32(len(req)) < size {
		return 0
	}
	out := handle(req[:size], int(maxOutput))
	if len(out) == 0 {
		out = []byte("{}")
	}
	resPtr := uintptr(unsafe.Pointer(&out[0]))
	pinned[resPtr] = out
	return uint64(resPtr)<<32 | uint64(len(out))
}
