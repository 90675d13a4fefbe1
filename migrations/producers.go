package migrations

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Producer is a PostgreSQL role that producers connect as, and the channels
// (shell-style globs) it may enqueue into.
type Producer struct {
	Role     string
	Channels []string
}

// Verbs are the names of the functions producers call (migrations 017 and
// 021): SetProducers grants them to producer roles, and each checks the
// caller's right to the channel before it reads or writes anything.
var Verbs = []string{"enqueue", "enqueue_many", "cancel", "status"}

// SetProducers makes producers the only roles, besides those with rights on
// effectd's tables, that may call effectd.enqueue and the other Verbs, each
// only on its channels. In one transaction it records them in
// effectd.producers, makes the verbs run with their owner's rights (SECURITY
// DEFINER, search_path fixed to effectd, pg_temp), takes from PUBLIC the right
// to execute effectd's functions, and for each role revokes every right on effectd's tables, sequences and functions,
// then grants USAGE on the schema and EXECUTE on the verbs. It refuses a
// role that does not exist or that holds the rights of effectd's owner (it
// could not be restricted). With no producers it empties effectd.producers and
// makes the verbs run with their caller's rights again (as before producer roles:
// the caller needs rights on the tables), granting nothing. It returns the
// statements it ran that change privileges.
func (m *Migrator) SetProducers(ctx context.Context, producers []Producer) (grants []string, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("access.producers: %w", err)
		}
	}()
	tx, err := m.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// Serialise with migrations and other instances writing the same grants.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM effectd.producers`); err != nil {
		return nil, err
	}
	rows, _ := tx.Query(ctx, `SELECT oid::regprocedure::text FROM pg_proc WHERE pronamespace = 'effectd'::regnamespace AND proname = ANY ($1) ORDER BY 1`, Verbs)
	verbs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	if len(producers) == 0 {
		for _, f := range verbs {
			if _, err := tx.Exec(ctx, `ALTER FUNCTION `+f+` SECURITY INVOKER RESET search_path`); err != nil {
				return nil, err
			}
		}
		return nil, tx.Commit(ctx)
	}
	var owner string
	if err := tx.QueryRow(ctx, `SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'effectd.intents'::regclass`).Scan(&owner); err != nil {
		return nil, err
	}
	for _, f := range verbs {
		grants = append(grants, `ALTER FUNCTION `+f+` SECURITY DEFINER SET search_path = effectd, pg_temp`)
	}
	grants = append(grants, `REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA effectd FROM PUBLIC`)
	for _, p := range producers {
		g, err := addProducer(ctx, tx, p, owner, verbs)
		if err != nil {
			return nil, err
		}
		grants = append(grants, g...)
	}
	for _, g := range grants {
		if _, err := tx.Exec(ctx, g); err != nil {
			return nil, fmt.Errorf("%s: %w", g, err)
		}
	}
	return grants, tx.Commit(ctx)
}

// addProducer records p in effectd.producers, after checking that its role
// exists and can be limited (owner is effectd's owner), and returns the
// statements that limit the role to calling the producers' functions (verbs).
func addProducer(ctx context.Context, tx pgx.Tx, p Producer, owner string, verbs []string) ([]string, error) {
	patterns := make([]string, len(p.Channels))
	for i, g := range p.Channels {
		var err error
		if patterns[i], err = GlobRegexp(g); err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", p.Role, i, err)
		}
	}
	var exists, super, ownerRights bool
	err := tx.QueryRow(ctx, `
SELECT true, r.rolsuper, pg_has_role(r.oid, $2::name, 'USAGE')
FROM pg_roles r WHERE r.rolname = $1`, p.Role, owner).Scan(&exists, &super, &ownerRights)
	if err == pgx.ErrNoRows {
		return nil, fmt.Errorf("%s: no such role; effectd does not create roles: CREATE ROLE %s LOGIN (or NOLOGIN, granted to a login role) first",
			p.Role, pgx.Identifier{p.Role}.Sanitize())
	}
	if err != nil {
		return nil, err
	}
	if super || ownerRights {
		return nil, fmt.Errorf("%s: the role is a superuser or has the rights of effectd's owner %q, so it cannot be limited to channels", p.Role, owner)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO effectd.producers (role, channels, patterns) VALUES ($1, $2, $3)`,
		p.Role, p.Channels, patterns); err != nil {
		return nil, err
	}
	r := pgx.Identifier{p.Role}.Sanitize()
	grants := []string{
		`REVOKE ALL ON ALL TABLES IN SCHEMA effectd FROM ` + r,
		`REVOKE ALL ON ALL SEQUENCES IN SCHEMA effectd FROM ` + r,
		`REVOKE ALL ON ALL FUNCTIONS IN SCHEMA effectd FROM ` + r,
		`GRANT USAGE ON SCHEMA effectd TO ` + r,
	}
	for _, f := range verbs {
		grants = append(grants, `GRANT EXECUTE ON FUNCTION `+f+` TO `+r)
	}
	return grants, nil
}

// GlobRegexp returns an anchored regular expression, in a syntax that both Go
// and PostgreSQL read alike, that matches what path.Match(glob, name) matches
// for a channel name (which never holds a '/').
func GlobRegexp(glob string) (string, error) {
	if glob == "" {
		return "", fmt.Errorf("empty pattern")
	}
	if _, err := path.Match(glob, ""); err != nil {
		return "", fmt.Errorf("%q: %w", glob, err)
	}
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(glob); i++ {
		switch c := glob[i]; c {
		case '*':
			b.WriteString("[^/]*")
		case '?':
			b.WriteString("[^/]")
		case '\\':
			i++
			b.WriteString(quoteChar(glob[i]))
		case '[':
			j := i + 1
			b.WriteString("[")
			if glob[j] == '^' {
				b.WriteString("^/")
				j++
			}
			for ; glob[j] != ']'; j++ {
				switch {
				case glob[j] == '\\':
					j++
					b.WriteString(quoteChar(glob[j]))
				case glob[j] == '-':
					b.WriteString("-")
				default:
					b.WriteString(quoteChar(glob[j]))
				}
			}
			b.WriteString("]")
			i = j
		default:
			b.WriteString(quoteChar(c))
		}
	}
	b.WriteString("$")
	return b.String(), nil
}

// quoteChar writes one byte of a glob as a literal: letters, digits and bytes
// at or above 0x80 as they are, everything else escaped with a backslash.
func quoteChar(c byte) string {
	if c >= 0x80 || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || slices.Contains([]byte{'_', ' '}, c) {
		return string(c)
	}
	return `\` + string(c)
}
