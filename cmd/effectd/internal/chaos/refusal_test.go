package chaos

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestRefusal: the server going away (40, 57, 08, and the XX000 errors with
// which Citus fails a transaction whose worker went away) is retried; any
// other error is a refusal.
func TestRefusal(t *testing.T) {
	cases := []struct {
		code, msg string
		refused   bool
	}{
		{"40001", "could not serialize access", false},
		{"57P01", "terminating connection due to administrator command", false},
		{"08006", "connection failure", false},
		{"XX000", "failure on connection marked as essential: localhost:5433", false},
		{"XX000", "terminating connection due to administrator command", false},
		{"XX000", "cache lookup failed for relation 1234", true},
		{"53200", "out of shared memory", true},
		{"23505", "duplicate key value violates unique constraint", true},
	}
	for _, c := range cases {
		_, refused := refusal(fmt.Errorf("enqueue: %w", &pgconn.PgError{Code: c.code, Message: c.msg}))
		if refused != c.refused {
			t.Errorf("%s %q: refused %v; want %v", c.code, c.msg, refused, c.refused)
		}
	}
}
