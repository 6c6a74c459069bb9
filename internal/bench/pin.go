package bench

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// On a machine of two cores, the database shares them with erpsync, Redis
// and the ERP: a backfill's every record costs CPU that the ceiling, a
// client writing rows it already has, leaves to the database. Config's
// DatabaseCPUs gives the database cores of its own instead, as a database
// on its own host has: for the whole run, the database servers' processes
// run on those CPUs only, and this process (the ceiling's client, the
// erpmock), the erpsync processes it starts and the Redis servers of the
// locks on the others. The affinities are put back when the run ends.

// ParseCPUs reads a CPU list as taskset -c writes one: "0", "0,2", "0-1".
func ParseCPUs(s string) ([]int, error) {
	var cpus []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a {
			return nil, fmt.Errorf("CPU list %q: want numbers and ranges such as 0 or 0,2 or 0-1", s)
		}
		for c := a; c <= b; c++ {
			if !slices.Contains(cpus, c) {
				cpus = append(cpus, c)
			}
		}
	}
	return cpus, nil
}

// pinning is a run's affinities while the database has CPUs of its own.
type pinning struct {
	ports serverPorts
	// saved is each pinned thread's affinity before, to put back.
	saved map[int]unix.CPUSet
	// dbBefore is the database's CPUs before.
	dbBefore unix.CPUSet
	note     string
}

// pin gives the database servers on ports the CPUs db, and this process
// and the Redis servers on ports the other CPUs that this process may
// use. It fails, changing nothing, unless db is a part of those CPUs that
// leaves some over, or when it finds no database process.
func pin(db []int, ports serverPorts) (*pinning, error) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return nil, fmt.Errorf("--database-cpus: read this process's CPUs: %w", err)
	}
	p := &pinning{ports: ports, saved: map[int]unix.CPUSet{}}
	var dbSet unix.CPUSet
	rest := all
	for _, c := range db {
		if !all.IsSet(c) {
			return nil, fmt.Errorf("--database-cpus: CPU %d is not one this process may run on (%s)", c, cpuList(all))
		}
		dbSet.Set(c)
		rest.Clear(c)
	}
	if rest.Count() == 0 {
		return nil, fmt.Errorf("--database-cpus %s leaves no CPU for erpsync, Redis and the bench", cpuList(dbSet))
	}
	var dbs, redis []string
	eachServer(ports, func(d, kind string, _ bool) {
		if kind == "redis" {
			redis = append(redis, d)
		} else {
			dbs = append(dbs, d)
		}
	})
	if len(dbs) == 0 {
		return nil, fmt.Errorf("--database-cpus: no database server process of this machine serves the bench (MySQL port %s, PostgreSQL port %s)", ports.mysql, cmp.Or(ports.postgres, "none"))
	}
	if err := unix.SchedGetaffinity(pidOf(dbs[0]), &p.dbBefore); err != nil {
		return nil, fmt.Errorf("--database-cpus: read the database's CPUs: %w", err)
	}
	self := fmt.Sprintf("/proc/%d", os.Getpid())
	for _, g := range []struct {
		dirs []string
		set  unix.CPUSet
	}{{dbs, dbSet}, {redis, rest}, {[]string{self}, rest}} {
		for _, d := range g.dirs {
			if err := p.set(d, g.set); err != nil {
				p.restore()
				return nil, fmt.Errorf("--database-cpus: %w", err)
			}
		}
	}
	p.note = fmt.Sprintf("the database servers (%d processes) on CPUs %s; the bench, erpsync and Redis (%d servers) on %s", len(dbs), cpuList(dbSet), len(redis), cpuList(rest))
	return p, nil
}

// set gives every thread of the process of /proc directory d the CPUs
// set, saving each one's affinity first.
func (p *pinning) set(d string, set unix.CPUSet) error {
	tasks, _ := filepath.Glob(filepath.Join(d, "task", "[0-9]*"))
	for _, t := range tasks {
		tid := pidOf(t)
		if tid == 0 {
			continue
		}
		var was unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &was); err != nil {
			continue // the thread ended
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			return fmt.Errorf("set the CPUs of thread %d of %s: %w", tid, d, err)
		}
		if _, ok := p.saved[tid]; !ok {
			p.saved[tid] = was
		}
	}
	return nil
}

// restore puts back the affinity of every thread pin set, and gives the
// database's processes started since (a PostgreSQL backend takes the
// postmaster's CPUs) the database's CPUs of before.
func (p *pinning) restore() {
	for tid, was := range p.saved {
		_ = unix.SchedSetaffinity(tid, &was)
	}
	eachServer(p.ports, func(d, kind string, _ bool) {
		if kind == "redis" {
			return
		}
		tasks, _ := filepath.Glob(filepath.Join(d, "task", "[0-9]*"))
		for _, t := range tasks {
			if tid := pidOf(t); tid > 0 {
				if _, ok := p.saved[tid]; !ok {
					_ = unix.SchedSetaffinity(tid, &p.dbBefore)
				}
			}
		}
	})
}

// pidOf is the process or thread id of a /proc directory, 0 if none.
func pidOf(d string) int {
	id, _ := strconv.Atoi(filepath.Base(d))
	return id
}

// cpuList writes set as a list of CPUs: "0,1".
func cpuList(set unix.CPUSet) string {
	var out []string
	for c := range len(set) * 64 {
		if set.IsSet(c) {
			out = append(out, strconv.Itoa(c))
		}
	}
	return strings.Join(out, ",")
}
