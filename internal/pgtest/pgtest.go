package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/localpg"
	"github.com/effectd/effectd/migrations"
)

var (
	once     sync.Once
	onceErr  error
	adminURL string // a database on the server with rights to CREATE DATABASE
	template string // a migrated database that each test's database is cloned from
	server   *localpg.Server
	tmpDir   string
	counter  atomic.Int64
	prefix   = fmt.Sprintf("effectd_test_%d_%d", os.Getpid(), time.Now().UnixNano()%1_000_000)
)

// atExit are what AtExit registered.
var atExit []func()

// AtExit has Main call f after the tests ran, before it stops the cluster: a
// test file with a build tag stops there what its tests started (the Citus
// tests' cluster), in a package whose TestMain is Main.
func AtExit(f func()) { atExit = append(atExit, f) }

// Main runs the tests of a package and stops the cluster that New started, if any.
// Call it from TestMain: func TestMain(m *testing.M) { pgtest.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	for _, f := range atExit {
		f()
	}
	if server != nil {
		server.Stop()
		os.RemoveAll(tmpDir)
	}
	os.Exit(code)
}

func setup(t testing.TB) {
	t.Helper()
	once.Do(func() { onceErr = start() })
	if onceErr != nil {
		t.Fatalf("pgtest: %v", onceErr)
	}
}

func start() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adminURL = os.Getenv("TEST_DATABASE_URL")
	if adminURL == "" {
		var err error
		if tmpDir, err = os.MkdirTemp("", "effectd-pg-"); err != nil {
			return err
		}
		if server, err = localpg.Start(ctx, tmpDir, localpg.Options{Fast: true}); err != nil {
			return err
		}
		adminURL = server.URL("postgres")
	}
	template = prefix + "_tmpl"
	if err := exec(ctx, adminURL, "CREATE DATABASE "+pgx.Identifier{template}.Sanitize()); err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, withDatabase(adminURL, template))
	if err != nil {
		return err
	}
	defer pool.Close()
	return migrations.New(pool).Up(ctx)
}

// URL returns the connection string of a fresh, migrated database that is
// dropped when the test ends.
func URL(t testing.TB) string {
	t.Helper()
	setup(t)
	ctx := context.Background()
	name := fmt.Sprintf("%s_%d", prefix, counter.Add(1))
	if err := exec(ctx, adminURL, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s",
		pgx.Identifier{name}.Sanitize(), pgx.Identifier{template}.Sanitize())); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		exec(context.Background(), adminURL, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	return withDatabase(adminURL, name)
}

// New returns a pool on a fresh, migrated database, closed when the test ends.
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), URL(t))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func exec(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

func withDatabase(dsn, db string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	u.Path = "/" + db
	return u.String()
}

// Cluster starts a PostgreSQL cluster of the test's own, for a test that stops
// and restarts it (localpg.Start on its Dir and Port) or needs its own server
// settings; whichever server runs there is stopped, and the directory removed,
// when the test ends. The directory is not t.TempDir: the postgres user must
// reach it when run as root.
func Cluster(t testing.TB, name string, settings ...string) *localpg.Server {
	t.Helper()
	return ClusterWithFiles(t, name, nil, settings...)
}

// ClusterWithFiles is Cluster with files (name → content, mode 0600) written
// into the cluster's directory before it starts, owned by the server's user: a
// setting names one relative to the data directory, as in
// "ssl_cert_file=../server.crt".
func ClusterWithFiles(t testing.TB, name string, files map[string][]byte, settings ...string) *localpg.Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "effectd-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for f, b := range files {
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pg, err := localpg.Start(context.Background(), dir, localpg.Options{Fast: true, Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Stop() })
	return pg
}

// Querier is what Plan reads a plan through: a pool, a connection or a
// transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Plan runs explain (an EXPLAIN statement) with args on db and returns its
// lines, joined by newlines; it fails t on an error.
func Plan(t testing.TB, db Querier, explain string, args ...any) string {
	t.Helper()
	rows, err := db.Query(context.Background(), explain, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
