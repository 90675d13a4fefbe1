package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of CPU times in /proc/PID/stat (CLK_TCK 100 on Linux).
const clockTick = 10 * time.Millisecond

// procStat reads /proc/PID/stat: the process's own user + system CPU (fields
// 14 and 15 of proc(5)), the CPU of its children it has reaped (16 and 17),
// and its parent's pid. ok is false when the process is gone.
func procStat(pid int) (own, reaped time.Duration, ppid int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, 0, false
	}
	s := string(b)
	end := strings.LastIndexByte(s, ')') // the command name may hold spaces and parentheses
	if end < 0 {
		return 0, 0, 0, false
	}
	f := strings.Fields(s[end+1:]) // f[0] is field 3, the state
	if len(f) < 15 {
		return 0, 0, 0, false
	}
	field := func(n int) time.Duration {
		v, _ := strconv.ParseInt(f[n-3], 10, 64)
		return time.Duration(v) * clockTick
	}
	ppid, _ = strconv.Atoi(f[1])
	return field(14) + field(15), field(16) + field(17), ppid, true
}

// procCPU is the user + system CPU of pid so far (0 when it is gone).
func procCPU(pid int) time.Duration {
	own, _, _, _ := procStat(pid)
	return own
}

// pgSnapshot is the CPU of one PostgreSQL server's processes at one moment:
// each living child of the postmaster with its kind, the postmaster's own,
// and what the postmaster's exited children (closed connections, finished
// autovacuum workers) spent, which the kernel adds to the postmaster once it
// reaps them.
type pgSnapshot struct {
	pids   map[int]pgProc
	own    time.Duration
	reaped time.Duration
}

type pgProc struct {
	kind string
	cpu  time.Duration
}

// postmasterPID reads the postmaster's pid from the first line of
// postmaster.pid in the server's data directory.
func postmasterPID(dataDir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(line))
}

// samplePG reads the CPU of the postmaster at pid and of all its children.
func samplePG(postmaster int) pgSnapshot {
	s := pgSnapshot{pids: map[int]pgProc{}}
	s.own, s.reaped, _, _ = procStat(postmaster)
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		own, _, ppid, ok := procStat(pid)
		if !ok || ppid != postmaster {
			continue
		}
		s.pids[pid] = pgProc{kind: pgKind(pid), cpu: own}
	}
	return s
}

// pgKinds are the titles of PostgreSQL's background processes, as they start
// their command line ("postgres: walwriter").
var pgKinds = []string{"checkpointer", "background writer", "walwriter", "autovacuum launcher",
	"autovacuum worker", "logical replication launcher", "archiver", "parallel worker", "walsender"}

// pgKind names the kind of PostgreSQL process pid from its title; any other
// child of the postmaster serves a client connection.
func pgKind(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	title := strings.TrimPrefix(strings.ReplaceAll(string(b), "\x00", " "), "postgres: ")
	for _, k := range pgKinds {
		if strings.HasPrefix(title, k) {
			return k
		}
	}
	return "client backends"
}

// pgExited is the kind under which pgDelta counts processes that exited
// between the two snapshots.
const pgExited = "exited processes"

// pgDelta is the CPU each kind of PostgreSQL process spent between a and b,
// the postmaster's own under "postmaster". A process living at both counts its
// difference, one born after a all of its CPU; one that exited after a counts
// what the postmaster reaped between the two, less what it had spent by a.
func pgDelta(a, b pgSnapshot) map[string]time.Duration {
	out := map[string]time.Duration{"postmaster": b.own - a.own}
	exited := b.reaped - a.reaped
	for pid, p := range b.pids {
		out[p.kind] += p.cpu - a.pids[pid].cpu // zero when born after a
	}
	for pid, p := range a.pids {
		if _, alive := b.pids[pid]; !alive {
			exited -= p.cpu
		}
	}
	out[pgExited] += exited
	return out
}
