package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/migrations"
)

var roleSeq atomic.Int64

// newRole creates a role unique to this test (roles belong to the whole
// cluster) and drops it at the end.
func newRole(t *testing.T, pool *pgxpool.Pool, base, options string) string {
	t.Helper()
	name := fmt.Sprintf("%s_%d_%d", base, time.Now().UnixNano()%1_000_000, roleSeq.Add(1))
	if _, err := pool.Exec(context.Background(), `CREATE ROLE `+name+` `+options); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		pool.Exec(ctx, `DROP OWNED BY `+name)
		pool.Exec(ctx, `DROP ROLE `+name)
	})
	return name
}

// connectAs opens a connection to pool's database as role.
func connectAs(t *testing.T, pool *pgxpool.Pool, role string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	cfg.User = role
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

const (
	refundPayload = `{"type": "refund", "payment_intent": "pi_1", "amount": 500}`
	smsPayload    = `{"to": "+15005550006", "body": "hi"}`
	enqueueSQL    = `SELECT effectd.enqueue(event_id => $1, channel => $2, payload => $3::jsonb)`
)

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// enqueue calls effectd.enqueue and returns the SQLSTATE and message of its error, if any.
func enqueue(q querier, event, channel, payload string) (code, msg string) {
	var inserted bool
	err := q.QueryRow(context.Background(), enqueueSQL, event, channel, payload).Scan(&inserted)
	return sqlState(err)
}

func sqlState(err error) (code, msg string) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code, pgErr.Message
	}
	if err != nil {
		return "?", err.Error()
	}
	return "", ""
}

// TestProducerRoles: with producers set, a producer enqueues only into its
// channels (42501 naming the channel otherwise, nothing inserted) and cannot
// touch effectd's tables; the role that counts is the one in effect, whether
// logged in as or switched to with SET ROLE, as through a pooler.
func TestProducerRoles(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO effectd.channels (name, provider) VALUES
  ('refund', 'stripe'), ('payout-eu', 'stripe'), ('sms', 'twilio')`); err != nil {
		t.Fatal(err)
	}
	payments := newRole(t, pool, "payments_app", "LOGIN")
	smsApp := newRole(t, pool, "sms_app", "LOGIN")
	// A pooler logs in as one role and switches to the producer's role per
	// transaction; NOINHERIT gives it nothing until it does.
	pooler := newRole(t, pool, "pooler", "LOGIN NOINHERIT")
	if _, err := pool.Exec(ctx, `GRANT `+payments+`, `+smsApp+` TO `+pooler); err != nil {
		t.Fatal(err)
	}
	// Rights a DBA may have granted before producer roles: they are taken away.
	if _, err := pool.Exec(ctx, `GRANT USAGE ON SCHEMA effectd TO `+payments+`;
GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA effectd TO `+payments); err != nil {
		t.Fatal(err)
	}
	grants, err := migrations.New(pool).SetProducers(ctx, []migrations.Producer{
		{Role: payments, Channels: []string{"refund", "payout-*"}},
		{Role: smsApp, Channels: []string{"sms"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(grants, "\n"), "GRANT EXECUTE ON FUNCTION effectd.enqueue(text,text,jsonb,timestamp with time zone,timestamp with time zone,text,bigint) TO \""+payments+`"`) {
		t.Errorf("grants do not give %s EXECUTE on enqueue:\n%s", payments, strings.Join(grants, "\n"))
	}

	pc := connectAs(t, pool, payments)
	if code, msg := enqueue(pc, "r1", "refund", refundPayload); code != "" {
		t.Errorf("payments → refund: %s %s", code, msg)
	}
	if code, msg := enqueue(pc, "p1", "payout-eu", refundPayload); code != "" {
		t.Errorf("payments → payout-eu: %s %s", code, msg)
	}
	code, msg := enqueue(pc, "s1", "sms", smsPayload)
	if code != "42501" || !strings.Contains(msg, `channel 'sms'`) {
		t.Errorf("payments → sms: %s %q, want 42501 naming the channel", code, msg)
	}
	// An event id another team's channel already holds: refused the same,
	// before anything could tell that the channel holds it.
	if code, msg := enqueue(pool, "s-held", "sms", smsPayload); code != "" {
		t.Fatalf("owner → sms: %s %s", code, msg)
	}
	if code, msg := enqueue(pc, "s-held", "sms", smsPayload); code != "42501" || !strings.Contains(msg, `channel 'sms'`) {
		t.Errorf("payments → sms with an event id sms holds: %q %q, want 42501 naming the channel, as for a new one", code, msg)
	}
	// Straight at the tables: refused.
	for _, q := range []string{
		`INSERT INTO effectd.intents (event_id, channel, payload, idempotency_key) VALUES ('x', 'refund', '{"type":"refund","amount":-500,"charge":"c"}', 'k')`,
		`UPDATE effectd.intents SET status = 'SENT'`,
		`SELECT count(*) FROM effectd.intents`,
		`DELETE FROM effectd.producers`,
		`SELECT effectd.check_producer('sms')`,
	} {
		if _, err := pc.Exec(ctx, q); func() string { c, _ := sqlState(err); return c }() != "42501" {
			t.Errorf("as %s: %s: %v, want 42501", payments, q, err)
		}
	}

	// SET ROLE: the role switched to counts, not the login role.
	pl := connectAs(t, pool, pooler)
	if code, _ := enqueue(pl, "x0", "refund", refundPayload); code != "42501" {
		t.Errorf("pooler without SET ROLE → refund: %q, want 42501", code)
	}
	tx, err := pl.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL ROLE `+smsApp); err != nil {
		t.Fatal(err)
	}
	if code, msg := enqueue(tx, "s2", "sms", smsPayload); code != "" {
		t.Errorf("pooler as %s → sms: %s %s", smsApp, code, msg)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// The next transaction on the same connection is someone else's.
	tx, err = pl.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL ROLE `+payments); err != nil {
		t.Fatal(err)
	}
	if code, msg := enqueue(tx, "s3", "sms", smsPayload); code != "42501" || !strings.Contains(msg, payments) {
		t.Errorf("pooler as %s → sms: %s %q, want 42501 naming the role", payments, code, msg)
	}
	tx.Rollback(ctx)
	if _, err := pl.Exec(ctx, `SET ROLE `+payments); err != nil {
		t.Fatal(err)
	}
	if code, msg := enqueue(pl, "r2", "refund", refundPayload); code != "" {
		t.Errorf("pooler SET ROLE %s → refund: %s %s", payments, code, msg)
	}

	// Nothing refused was inserted; what was allowed was.
	rows, _ := pool.Query(ctx, `SELECT channel || '/' || event_id FROM effectd.intents ORDER BY 1`)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := "payout-eu/p1 refund/r1 refund/r2 sms/s-held sms/s2"; strings.Join(got, " ") != want {
		t.Errorf("intents = %v, want %s", got, want)
	}
	// effectd itself (the owner) still enqueues anywhere.
	if code, msg := enqueue(pool, "s9", "sms", smsPayload); code != "" {
		t.Errorf("owner → sms: %s %s", code, msg)
	}
	// Producers removed: the listed roles lose their channels.
	if _, err := migrations.New(pool).SetProducers(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if code, _ := enqueue(pc, "r3", "refund", refundPayload); code != "42501" {
		t.Errorf("after producers are removed, payments → refund: %q, want 42501", code)
	}
}

// TestNoProducers: without access.producers a role with rights on the tables
// enqueues as before, and one without is refused.
func TestNoProducers(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO effectd.channels (name, provider) VALUES ('sms', 'twilio')`); err != nil {
		t.Fatal(err)
	}
	app := newRole(t, pool, "app", "LOGIN")
	stranger := newRole(t, pool, "stranger", "LOGIN")
	if _, err := pool.Exec(ctx, `GRANT USAGE ON SCHEMA effectd TO `+app+`, `+stranger+`;
GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA effectd TO `+app); err != nil {
		t.Fatal(err)
	}
	if code, msg := enqueue(connectAs(t, pool, app), "s1", "sms", smsPayload); code != "" {
		t.Errorf("app with table rights → sms: %s %s", code, msg)
	}
	if code, msg := enqueue(connectAs(t, pool, stranger), "s2", "sms", smsPayload); code != "42501" {
		t.Errorf("role without rights → sms: %s %s, want 42501", code, msg)
	}
}

// TestSetProducersRefuses a role that does not exist or that cannot be limited.
func TestSetProducersRefuses(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	super := newRole(t, pool, "super", "SUPERUSER")
	for _, p := range []migrations.Producer{
		{Role: "no_such_role_x", Channels: []string{"sms"}},
		{Role: super, Channels: []string{"sms"}},
		{Role: super, Channels: []string{"sms["}},
	} {
		if _, err := migrations.New(pool).SetProducers(ctx, []migrations.Producer{p}); err == nil || !strings.Contains(err.Error(), p.Role) {
			t.Errorf("SetProducers(%+v) = %v, want an error naming the role", p, err)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM effectd.producers`).Scan(&n); err != nil || n != 0 {
		t.Errorf("producers after refusals: %d, %v", n, err)
	}
}

// enqueueAttributes returns, per overload of effectd.enqueue, whether it runs
// as its owner and its fixed settings.
func enqueueAttributes(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, _ := pool.Query(context.Background(), `
SELECT p.prosecdef::text || ' ' || coalesce(array_to_string(p.proconfig, ','), '')
FROM pg_proc p WHERE p.pronamespace = 'effectd'::regnamespace AND p.proname = 'enqueue'`)
	attrs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(attrs) == 0 {
		t.Fatalf("enqueue functions: %v, %v", attrs, err)
	}
	return attrs
}

// TestEnqueueRunsAsOwner: with producers, enqueue runs as its owner with a
// fixed search_path; without, as its caller (no cost on every enqueue).
func TestEnqueueRunsAsOwner(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	if got := enqueueAttributes(t, pool); got[0] != "false " {
		t.Errorf("enqueue without producers: %v, want SECURITY INVOKER without settings", got)
	}
	role := newRole(t, pool, "app", "LOGIN")
	if _, err := migrations.New(pool).SetProducers(ctx, []migrations.Producer{{Role: role, Channels: []string{"sms"}}}); err != nil {
		t.Fatal(err)
	}
	for _, a := range enqueueAttributes(t, pool) {
		if a != "true search_path=effectd, pg_temp" {
			t.Errorf("enqueue with producers: %q, want SECURITY DEFINER with search_path=effectd, pg_temp", a)
		}
	}
	if _, err := migrations.New(pool).SetProducers(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := enqueueAttributes(t, pool); got[0] != "false " {
		t.Errorf("enqueue after producers are removed: %v, want SECURITY INVOKER again", got)
	}
}

// TestGlobRegexp: the SQL pattern matches what path.Match matches, in Go and in PostgreSQL.
func TestGlobRegexp(t *testing.T) {
	pool := pgtest.New(t)
	globs := []string{"sms", "payout-*", "*", "sms-?", "re[a-c]und", "x[^0-9]", `a\*b`, "a.b", "*-eu", "p[.]x"}
	names := []string{"sms", "sms-1", "sms-12", "payout-", "payout-eu", "payout", "refund", "reaund", "redund", "xa", "x1",
		"a*b", "aXb", "a.b", "acb", "de-eu", "p.x", "pax", "az", "-z", "bz"}
	for _, g := range globs {
		re, err := migrations.GlobRegexp(g)
		if err != nil {
			t.Fatalf("GlobRegexp(%q): %v", g, err)
		}
		goRe := regexp.MustCompile(re)
		for _, n := range names {
			want, _ := path.Match(g, n)
			var pg bool
			if err := pool.QueryRow(context.Background(), `SELECT $1 ~ $2`, n, re).Scan(&pg); err != nil {
				t.Fatalf("%q ~ %q: %v", n, re, err)
			}
			if goRe.MatchString(n) != want || pg != want {
				t.Errorf("glob %q (regexp %q) on %q: path.Match %v, Go %v, PostgreSQL %v", g, re, n, want, goRe.MatchString(n), pg)
			}
		}
	}
	for _, bad := range []string{"", "a[", `a\`} {
		if _, err := migrations.GlobRegexp(bad); err == nil {
			t.Errorf("GlobRegexp(%q): no error", bad)
		}
	}
}
