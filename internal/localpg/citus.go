package localpg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNoCitus means PostgreSQL has no Citus library to preload.
var ErrNoCitus = errors.New("localpg: Citus is not installed (no citus.so in PostgreSQL's library directory); .ci/citus-install builds it from ../shared/citus")

// Citus is a Citus cluster on loopback: a coordinator and its workers, each a
// cluster of its own (a directory under Dir, a port, shared_preload_libraries
// = citus). Its databases exist on every node, each with the citus extension
// and the workers registered on the coordinator (CreateDatabase).
type Citus struct {
	Dir         string
	Coordinator *Server
	Workers     []*Server
	opt         Options
}

// CitusLibrary returns the path of citus.so in the library directory of the
// PostgreSQL whose binaries Start runs, or ErrNoCitus.
func CitusLibrary() (string, error) {
	bin, err := binDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(filepath.Dir(bin), "lib") // Debian: /usr/lib/postgresql/N/{bin,lib}
	if out, err := exec.Command(filepath.Join(bin, "pg_config"), "--pkglibdir").Output(); err == nil {
		dir = strings.TrimSpace(string(out))
	}
	lib := filepath.Join(dir, "citus.so")
	if _, err := os.Stat(lib); err != nil {
		return "", fmt.Errorf("%w: looked for %s", ErrNoCitus, lib)
	}
	return lib, nil
}

// StartCitus starts a coordinator and workers workers under dir (each in its
// own subdirectory: coordinator, worker1, ...), or starts them again on their
// directories and ports when dir already holds them. opt applies to every
// node, with shared_preload_libraries = citus added; its Port is ignored.
// The cluster has no database of Citus yet: CreateDatabase makes one.
func StartCitus(ctx context.Context, dir string, workers int, opt Options) (*Citus, error) {
	if _, err := CitusLibrary(); err != nil {
		return nil, err
	}
	opt.Port = 0
	opt.Settings = append([]string{"shared_preload_libraries=citus", "shared_buffers=128MB",
		// one-row statements across the loopback: no need to warm connection pools
		"citus.max_cached_conns_per_worker=4"}, opt.Settings...)
	c := &Citus{Dir: dir, opt: opt}
	var err error
	if c.Coordinator, err = c.startNode(ctx, "coordinator", 0); err != nil {
		return nil, err
	}
	for i := 1; i <= workers; i++ {
		w, err := c.startNode(ctx, fmt.Sprintf("worker%d", i), 0)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Workers = append(c.Workers, w)
	}
	return c, nil
}

// startNode starts the node in dir/name, on port (0: a free one).
func (c *Citus) startNode(ctx context.Context, name string, port int) (*Server, error) {
	opt := c.opt
	opt.Port = port
	s, err := Start(ctx, filepath.Join(c.Dir, name), opt)
	if err != nil {
		return nil, fmt.Errorf("localpg: Citus %s: %w", name, err)
	}
	return s, nil
}

// Nodes returns the coordinator, then the workers.
func (c *Citus) Nodes() []*Server { return append([]*Server{c.Coordinator}, c.Workers...) }

// URL returns the coordinator's connection string for database.
func (c *Citus) URL(database string) string { return c.Coordinator.URL(database) }

// CreateDatabase creates name on every node with the citus extension, then
// registers the coordinator and the workers in it on the coordinator. Each
// database of a Citus cluster has its own metadata, and Citus 13 propagates
// CREATE DATABASE to the workers only with citus.enable_create_database_propagation
// (off by default), so each node gets its own CREATE DATABASE here. A database
// with the extension cannot be a template (Citus's maintenance daemon stays
// connected to it), so every database is made this way.
func (c *Citus) CreateDatabase(ctx context.Context, name string) error {
	for _, n := range c.Nodes() {
		if err := execSQL(ctx, n.URL("postgres"), "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return fmt.Errorf("localpg: CREATE DATABASE %s on port %d: %w", name, n.Port, err)
		}
		if err := execSQL(ctx, n.URL(name), "CREATE EXTENSION citus"); err != nil {
			return fmt.Errorf("localpg: CREATE EXTENSION citus in %s on port %d: %w", name, n.Port, err)
		}
	}
	conn, err := pgx.Connect(ctx, c.URL(name))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT citus_set_coordinator_host('127.0.0.1', $1)", c.Coordinator.Port); err != nil {
		return fmt.Errorf("localpg: citus_set_coordinator_host: %w", err)
	}
	for _, w := range c.Workers {
		if _, err := conn.Exec(ctx, "SELECT citus_add_node('127.0.0.1', $1)", w.Port); err != nil {
			return fmt.Errorf("localpg: citus_add_node(127.0.0.1, %d): %w", w.Port, err)
		}
	}
	return nil
}

// DropDatabase drops name on every node, ending its sessions. The
// coordinator goes first, so that no session of its reaches a worker's copy
// again; a worker's copy still in use (55006: a session the coordinator opened
// just before) is dropped again until ctx ends.
func (c *Citus) DropDatabase(ctx context.Context, name string) error {
	var errs []error
	for _, n := range c.Nodes() {
		for {
			err := execSQL(ctx, n.URL("postgres"), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			var pgErr *pgconn.PgError
			if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" || ctx.Err() != nil {
				errs = append(errs, err)
				break
			}
			time.Sleep(200 * time.Millisecond) // a poll, until ctx ends
		}
	}
	return errors.Join(errs...)
}

// StopWorker stops worker i (0-based) quickly: its sessions are cut, and the
// coordinator's statements that need it fail until StartWorker.
func (c *Citus) StopWorker(i int) error { return c.Workers[i].Stop() }

// StartWorker starts worker i again on its directory and port.
func (c *Citus) StartWorker(ctx context.Context, i int) error {
	w := c.Workers[i]
	s, err := c.startNode(ctx, filepath.Base(w.Dir), w.Port)
	if err != nil {
		return err
	}
	c.Workers[i] = s
	return nil
}

// RestartWorker stops worker i and starts it again on the same port.
func (c *Citus) RestartWorker(ctx context.Context, i int) error {
	if err := c.StopWorker(i); err != nil {
		return err
	}
	return c.StartWorker(ctx, i)
}

// Stop stops every node.
func (c *Citus) Stop() error {
	var errs []error
	for _, n := range c.Nodes() {
		if n != nil {
			errs = append(errs, n.Stop())
		}
	}
	return errors.Join(errs...)
}

func execSQL(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}
