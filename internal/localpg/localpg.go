package localpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Options tune a cluster. The zero value is a durable server on a free port.
type Options struct {
	Port     int      // 0 picks a free loopback port
	Fast     bool     // fsync, synchronous_commit and full_page_writes off: for tests only
	Settings []string // extra "name=value" server settings, applied last
	// SyncStandby names a standby (its name in StartStandby) that every commit
	// waits for until it has applied it: synchronous_standby_names and
	// synchronous_commit=remote_apply. Commits block while that standby is down.
	SyncStandby string
}

// Server is a running cluster.
type Server struct {
	Dir    string // data directory
	Port   int
	Socket string // directory of the Unix socket
	bin    string
	asUser *user.User // non-nil when commands run as the postgres user
}

// ErrNoPostgres means no PostgreSQL server binaries were found.
var ErrNoPostgres = errors.New("localpg: no PostgreSQL server binaries (initdb, pg_ctl) found; install postgresql")

// Start initialises dir if it holds no cluster yet and starts the server.
func Start(ctx context.Context, dir string, opt Options) (*Server, error) {
	s, err := prepare(dir, opt.Port)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "data", "PG_VERSION")); err != nil {
		if err := s.run(ctx, "initdb", "-D", s.data(), "-U", "postgres",
			"--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C"); err != nil {
			return nil, err
		}
	}
	// A server left running in dir by a previous run that did not stop it: stop it.
	if _, err := os.Stat(filepath.Join(s.data(), "postmaster.pid")); err == nil {
		if s.run(ctx, "pg_ctl", "-D", s.data(), "status") == nil {
			s.run(ctx, "pg_ctl", "-D", s.data(), "-m", "fast", "-w", "stop")
		}
	}
	if err := s.start(ctx, opt); err != nil {
		return nil, err
	}
	return s, nil
}

// StartStandby copies the running cluster s into dir with pg_basebackup -R
// and starts the copy as a streaming standby of s, on a port of its own. name
// is the standby's cluster_name, which is also the name it reports to s: the
// name a primary lists in synchronous_standby_names (see Options.SyncStandby).
// The standby is read-only until Promote.
func (s *Server) StartStandby(ctx context.Context, dir, name string, opt Options) (*Server, error) {
	st, err := prepare(dir, opt.Port)
	if err != nil {
		return nil, err
	}
	if err := st.run(ctx, "pg_basebackup", "-D", st.data(), "-R", "-X", "stream", "-c", "fast", "--no-sync",
		"-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", "postgres"); err != nil {
		return nil, err
	}
	opt.Settings = append([]string{"cluster_name=" + name}, opt.Settings...)
	if err := st.start(ctx, opt); err != nil {
		return nil, err
	}
	return st, nil
}

// Promote turns a standby into a primary that accepts writes, and waits until it does.
func (s *Server) Promote(ctx context.Context) error {
	return s.run(ctx, "pg_ctl", "-D", s.data(), "-w", "-t", "60", "promote")
}

// StopImmediate kills the server the way a crash would (pg_ctl stop -m
// immediate): no shutdown checkpoint, every connection cut, nothing more sent
// to standbys.
func (s *Server) StopImmediate() error {
	return s.run(context.Background(), "pg_ctl", "-D", s.data(), "-m", "immediate", "-w", "stop")
}

// prepare makes dir ready for a cluster run by this process (or the postgres
// user when root), and picks a free port when port is 0.
func prepare(dir string, port int) (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, Port: port, Socket: filepath.Join(dir, "socket"), bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("localpg: running as root needs a postgres user: %w", err)
		}
		s.asUser = u
	}
	if s.Port == 0 {
		if s.Port, err = freePort(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("localpg: %w", err)
	}
	if err := os.MkdirAll(s.Socket, 0o700); err != nil {
		return nil, fmt.Errorf("localpg: %w", err)
	}
	if err := s.chown(); err != nil {
		return nil, err
	}
	if err := s.reachable(); err != nil {
		return nil, err
	}
	return s, nil
}

// start starts the server on its data directory with opt's settings.
func (s *Server) start(ctx context.Context, opt Options) error {
	settings := []string{
		"listen_addresses=127.0.0.1",
		"port=" + strconv.Itoa(s.Port),
		"unix_socket_directories=" + s.Socket,
		"max_connections=300",
		"shared_buffers=256MB",
	}
	if opt.Fast {
		settings = append(settings, "fsync=off", "synchronous_commit=off", "full_page_writes=off")
	}
	if opt.SyncStandby != "" {
		settings = append(settings, "synchronous_standby_names="+opt.SyncStandby, "synchronous_commit=remote_apply")
	}
	settings = append(settings, opt.Settings...)
	var o strings.Builder
	for _, kv := range settings {
		o.WriteString(" -c " + kv)
	}
	return s.run(ctx, "pg_ctl", "-D", s.data(), "-l", filepath.Join(s.Dir, "server.log"),
		"-o", o.String(), "-w", "-t", "60", "start")
}

func (s *Server) data() string { return filepath.Join(s.Dir, "data") }

// URL returns a connection string for database on the loopback port.
func (s *Server) URL(database string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, database)
}

// Stop shuts the server down quickly.
func (s *Server) Stop() error {
	return s.run(context.Background(), "pg_ctl", "-D", s.data(), "-m", "fast", "-w", "stop")
}

func (s *Server) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, name), args...)
	if s.asUser != nil {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", filepath.Join(s.bin, name)}, args...)...)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Dir = s.Dir
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if b, _ := os.ReadFile(filepath.Join(s.Dir, "server.log")); len(b) > 0 && name == "pg_ctl" {
			msg += "\nserver.log: " + lastLines(string(b), 10)
		}
		return fmt.Errorf("localpg: %s: %w: %s", name, err, msg)
	}
	return nil
}

// chown hands the directory to the postgres user when running as root.
func (s *Server) chown() error {
	if s.asUser == nil {
		return nil
	}
	uid, _ := strconv.Atoi(s.asUser.Uid)
	gid, _ := strconv.Atoi(s.asUser.Gid)
	return filepath.Walk(s.Dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// reachable checks that the postgres user can reach Dir: every ancestor must
// be searchable by others when the server runs as another user.
func (s *Server) reachable() error {
	if s.asUser == nil {
		return nil
	}
	for d := filepath.Dir(s.Dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("localpg: %w", err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("localpg: the postgres user cannot reach %s: %s is not searchable by others (chmod o+x it, use another directory, or set DATABASE_URL)", s.Dir, d)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// Bin returns the path of the PostgreSQL program name (pg_dump, psql, …) from
// the binaries the servers start from, so a client matches the server's version.
func Bin(name string) (string, error) {
	dir, err := binDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

func binDir() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", ErrNoPostgres
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("localpg: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
