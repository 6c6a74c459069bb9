package lock

import "runtime"

// growStack makes the calling goroutine's stack as large as a Redis call
// through go-redis needs while the goroutine is new and its stack holds a
// frame or two, so that it is copied once, cheaply. A goroutine that
// starts with a small stack grows it on the way down go-redis's call path
// instead, copying and adjusting every frame above the growth each time:
// a fifth of the client's CPU in a profile of a Redlock with one caller
// (runtime.copystack), 5% with growStack, and 12% less client CPU per
// lock+unlock pair in alternating runs of bench/lockbench. The goroutines
// that exist to make Redis calls (a Redlock's calls to its nodes, a
// batch's sender) call it first.
//
//go:noinline
func growStack() {
	var frame [8 << 10]byte
	keep(frame[:])
}

// keep keeps b, so that the compiler cannot drop growStack's frame.
//
//go:noinline
func keep(b []byte) { runtime.KeepAlive(b) }
