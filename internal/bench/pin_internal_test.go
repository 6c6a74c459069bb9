package bench

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseCPUs(t *testing.T) {
	for in, want := range map[string]string{"0": "0", "0,2": "0,2", "0-2": "0,1,2", " 1 , 0-1": "1,0"} {
		got, err := ParseCPUs(in)
		if err != nil {
			t.Errorf("ParseCPUs(%q): %v", in, err)
			continue
		}
		var s []string
		for _, c := range got {
			s = append(s, string(rune('0'+c)))
		}
		if strings.Join(s, ",") != want {
			t.Errorf("ParseCPUs(%q) = %v, want %s", in, got, want)
		}
	}
	for _, in := range []string{"", "x", "-1", "2-1", "0,", "1-"} {
		if got, err := ParseCPUs(in); err == nil {
			t.Errorf("ParseCPUs(%q) = %v, want an error", in, got)
		}
	}
}

// pin refuses, before it changes any affinity, a CPU this process may not
// use, a list that leaves no CPU for the others, and a machine without the
// database: the test's own affinity is the same after each refusal.
func TestPinRefuses(t *testing.T) {
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		t.Fatal(err)
	}
	var all []int
	for c := range len(before) * 64 {
		if before.IsSet(c) {
			all = append(all, c)
		}
	}
	cases := map[string]struct {
		cpus  []int
		ports serverPorts
		want  string
	}{
		"not ours":    {[]int{len(before)*64 - 1}, serverPorts{mysql: "1"}, "is not one this process may run on"},
		"none left":   {all, serverPorts{mysql: "1"}, "leaves no CPU"},
		"no database": {all[:1], serverPorts{mysql: "1", postgres: ""}, "no database server process"},
	}
	if len(all) < 2 {
		delete(cases, "no database")
	}
	for name, c := range cases {
		p, err := pin(c.cpus, c.ports)
		if err == nil {
			p.restore()
			t.Errorf("%s: pin(%v) did not refuse", name, c.cpus)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: pin(%v): %v, want %q", name, c.cpus, err, c.want)
		}
		var now unix.CPUSet
		if err := unix.SchedGetaffinity(0, &now); err != nil || now != before {
			t.Errorf("%s: affinity %s after the refusal, was %s", name, cpuList(now), cpuList(before))
		}
	}
}
