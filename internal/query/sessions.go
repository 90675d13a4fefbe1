package query

import _ "embed"

// The console's session store (scs) on effectd.console_sessions.
var (
	// SessionFind reads the data of unexpired session $1.
	//
	//go:embed session_find.sql
	SessionFind string

	// SessionCommit saves session $1 with data $2 until $3, and drops sessions
	// that expired an hour ago.
	//
	//go:embed session_commit.sql
	SessionCommit string

	// SessionDelete deletes session $1.
	//
	//go:embed session_delete.sql
	SessionDelete string
)
