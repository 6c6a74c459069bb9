package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// CPU is the processor time each party spent on one measurement, in
// seconds: where the time of the machine went.
type CPU struct {
	// Erpsync is the backfill process (user + system, from its rusage).
	Erpsync float64 `json:"erpsync"`
	// MySQL and Redis are the servers: the mariadbd/mysqld and
	// redis-server processes of the machine that serve the bench's ports.
	// Other clients of the same servers count too.
	MySQL float64 `json:"mysql"`
	// Postgres is PostgreSQL's server processes, the backends that
	// ended during the measurement included (as the postmaster's
	// children).
	Postgres float64 `json:"postgres,omitempty"`
	Redis    float64 `json:"redis"`
	// Bench is this process: the in-process erpmock, or the statements of
	// the ceiling and the seed pipeline.
	Bench float64 `json:"bench"`
}

// Total is the sum of the parts.
func (c CPU) Total() float64 { return c.Erpsync + c.MySQL + c.Postgres + c.Redis + c.Bench }

// userHZ is the unit of the times in /proc/<pid>/stat: 100 on every Linux
// architecture Go runs on.
const userHZ = 100

// cpuMeter reads the CPU time of the servers and of this process.
type cpuMeter struct {
	ports  serverPorts
	server CPU
	self   float64
}

// serverPorts are the TCP ports of the servers to meter: one MySQL or one
// PostgreSQL, and the Redis servers of the locks (several for a Redlock or
// a cluster).
type serverPorts struct {
	mysql    string
	postgres string
	redis    []string
}

func startCPU(p serverPorts) cpuMeter {
	return cpuMeter{ports: p, server: serverCPU(p), self: selfCPU()}
}

// stop returns the CPU time spent since start.
func (c cpuMeter) stop() CPU {
	s := serverCPU(c.ports)
	return CPU{MySQL: s.MySQL - c.server.MySQL, Postgres: s.Postgres - c.server.Postgres, Redis: s.Redis - c.server.Redis, Bench: selfCPU() - c.self}
}

func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// serverCPU sums utime+stime of the database and Redis servers on ports
// p (see eachServer). The postmaster is read last: a backend that ends
// while the others are read then counts in its cutime, or twice, never
// nowhere (read first, a backend reaped after it and before its own turn
// was lost, and a short measurement came out below zero); with the CPU of
// its children that ended, so that a child erpsync's backends count after
// they exit.
func serverCPU(p serverPorts) CPU {
	var c CPU
	var postmasters []string
	eachServer(p, func(d, kind string, postmaster bool) {
		switch {
		case postmaster:
			postmasters = append(postmasters, d)
		case kind == "mysql":
			c.MySQL += procCPU(d, false)
		case kind == "postgres":
			c.Postgres += procCPU(d, false)
		default:
			c.Redis += procCPU(d, false)
		}
	})
	for _, d := range postmasters {
		c.Postgres += procCPU(d, true)
	}
	return c
}

// eachServer calls fn with the /proc directory of each process of the
// database and Redis servers on ports p, and its kind: "mysql",
// "postgres" or "redis". A server is told by its command line:
// redis-server shows "host:port"; mariadbd shows --port=N, or none for
// 3306. PostgreSQL's processes are every "postgres" of the machine,
// whatever its port (its command line does not show it): the backends,
// and the postmaster (its title not rewritten to "postgres: ..."), for
// which postmaster is true.
func eachServer(p serverPorts, fn func(d, kind string, postmaster bool)) {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		comm, err := os.ReadFile(filepath.Join(d, "comm"))
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(d, "cmdline"))
		switch string(bytes.TrimSpace(comm)) {
		case "mariadbd", "mysqld":
			port := "3306"
			for _, arg := range bytes.Split(cmdline, []byte{0}) {
				if v, ok := bytes.CutPrefix(arg, []byte("--port=")); ok {
					port = string(v)
				}
			}
			if port == p.mysql {
				fn(d, "mysql", false)
			}
		case "postgres":
			if p.postgres != "" {
				fn(d, "postgres", !bytes.HasPrefix(cmdline, []byte("postgres:")))
			}
		case "redis-server":
			if slices.ContainsFunc(p.redis, func(port string) bool {
				return bytes.HasSuffix(bytes.TrimRight(cmdline, "\x00 "), []byte(":"+port)) || bytes.Contains(cmdline, []byte(":"+port+" "))
			}) {
				fn(d, "redis", false)
			}
		}
	}
}

// procCPU is the utime+stime of the process of /proc directory d, in
// seconds; with children, also the cutime and cstime of its children that
// ended (the postmaster's: its backends that exited).
func procCPU(d string, children bool) float64 {
	stat, err := os.ReadFile(filepath.Join(d, "stat"))
	if err != nil {
		return 0
	}
	// Fields after the ")" that ends the command: state is field 3,
	// utime 14 and stime 15, cutime 16 and cstime 17.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 15 {
		return 0
	}
	fields := []int{11, 12}
	if children {
		fields = append(fields, 13, 14)
	}
	ticks := 0.0
	for _, j := range fields {
		v, _ := strconv.ParseFloat(string(f[j]), 64)
		ticks += v
	}
	return ticks / userHZ
}
