// Package freeport finds loopback TCP ports for the servers that the tests
// and the benchmarks start as processes (redis-server, erpsync's
// --http-addr), which must be given a port rather than bind port 0.
//
// A port found free by listening on port 0 comes from the kernel's
// ephemeral range (32768-60999 on Linux), which every outgoing connection
// of every process on the machine draws from too: under parallel test
// binaries, one of them may take it between the check and the server's
// bind, and the server exits. The ports here lie below that range, where
// only a listener that chose its port can be, and a Redis Cluster node's
// bus port (the port + 10,000) is below it as well.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
)

// The range a port is drawn from: [low, high), and a port's bus port
// (+busOffset) below the ephemeral range's usual start, 32768.
const (
	low       = 16384
	high      = 22768
	busOffset = 10000
)

// tries bounds the ports tried before TCP gives up: a port is taken only
// when a listener chose it, so a few tries find a free one.
const tries = 100

// ErrNone says no port of the range was free.
var ErrNone = errors.New("freeport: no free port")

// TCP returns a port of 127.0.0.1 on which nothing listened a moment ago,
// nor on the port 10,000 above it (a Redis Cluster node's bus), drawn at
// random from 16384-22767 so that parallel callers seldom meet.
func TCP() (int, error) {
	for range tries {
		p := low + rand.IntN(high-low)
		if free(p) && free(p+busOffset) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%w in %d-%d after %d tries", ErrNone, low, high-1, tries)
}

// Addr returns "127.0.0.1:port" for a port of TCP.
func Addr() (string, error) {
	p, err := TCP()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

// free reports whether port p of 127.0.0.1 could be listened on.
func free(p int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}
