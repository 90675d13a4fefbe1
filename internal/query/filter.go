package query

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Stmt is a statement built from the filters a caller gives: a head read from
// a .sql file, then one condition for each filter present, so no condition of
// the form `$n IS NULL OR col = $n` is ever planned. ListIntents, ListEvents
// and FreezeBulk build theirs with it and run them as unnamed statements,
// planned for their values at every call.
type Stmt struct {
	b    strings.Builder
	Args []any // the arguments, $1 first
}

// NewStmt starts a statement with head, whose own parameters are args ($1…).
func NewStmt(head string, args ...any) *Stmt {
	s := &Stmt{Args: args}
	s.b.WriteString(head)
	return s
}

// Arg adds v as the next argument and returns its placeholder.
func (s *Stmt) Arg(v any) string {
	s.Args = append(s.Args, v)
	return "$" + strconv.Itoa(len(s.Args))
}

// And adds "AND cond", where each %s of cond is the placeholder of the next
// of vals; without vals, cond is added as it is.
func (s *Stmt) And(cond string, vals ...any) {
	if len(vals) == 0 {
		s.b.WriteString("  AND " + cond + "\n")
		return
	}
	ph := make([]any, len(vals))
	for i, v := range vals {
		ph[i] = s.Arg(v)
	}
	fmt.Fprintf(&s.b, "  AND "+cond+"\n", ph...)
}

// closedWord matches the values of status and delivery, closed sets spelled in
// capitals or small letters: such a value is written into the statement, so
// the planner sees it and picks the partial index made for it.
var closedWord = regexp.MustCompile(`^[A-Za-z_]{1,32}$`)

// Word is the SQL for `col = v`, v written in when it is a closed word and an
// argument otherwise. A SENDING row always has a lease (constraint
// intents_sending_leased); saying so lets the planner read intents_lease.
func (s *Stmt) Word(col, v string) string {
	if !closedWord.MatchString(v) {
		return col + " = " + s.Arg(v)
	}
	if col == "status" && v == "SENDING" {
		return "(status = 'SENDING' AND lease_expires_at IS NOT NULL)"
	}
	return fmt.Sprintf("%s = '%s'", col, v)
}

// Raw adds text as it is.
func (s *Stmt) Raw(text string) { s.b.WriteString(text) }

// SQL returns the statement.
func (s *Stmt) SQL() string { return s.b.String() }
