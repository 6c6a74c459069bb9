package freeport

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// ephemeral returns the kernel's range of ports for outgoing connections.
func ephemeral(t *testing.T) (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768, 60999
	}
	f := strings.Fields(string(b))
	lo, _ = strconv.Atoi(f[0])
	hi, _ = strconv.Atoi(f[1])
	return lo, hi
}

// TestPortsLieOutsideTheEphemeralRange draws ports and checks that each,
// and its bus port, lies outside the kernel's ephemeral range and can be
// listened on.
func TestPortsLieOutsideTheEphemeralRange(t *testing.T) {
	lo, hi := ephemeral(t)
	for range 200 {
		p, err := TCP()
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []int{p, p + busOffset} {
			if q >= lo && q <= hi {
				t.Fatalf("port %d lies in the ephemeral range %d-%d", q, lo, hi)
			}
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d, found free: %v", p, err)
		}
		_ = l.Close()
	}
}

// TestATakenPortIsNotGiven holds the ports TCP gives, and checks that it
// never gives one of them again.
func TestATakenPortIsNotGiven(t *testing.T) {
	held := map[int]net.Listener{}
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for range 300 {
		p, err := TCP()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := held[p]; ok {
			t.Fatalf("port %d given while held", p)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d, found free: %v", p, err)
		}
		held[p] = l
	}
}
