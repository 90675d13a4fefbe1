package query

import _ "embed"

// The chaos suite's reads (cmd/effectd/internal/chaos): what its checker
// holds effectd's guarantees against, and whether a run has drained.
var (
	// ChaosIntents reads every intent with counts of its telling attempts.
	//
	//go:embed chaos_intents.sql
	ChaosIntents string

	// ChaosLateCompletions lists the intents whose settled attempt later had
	// a send outcome accepted.
	//
	//go:embed chaos_late_completions.sql
	ChaosLateCompletions string

	// ChaosAttemptDetails lists the attempts of intents $1, for the report.
	//
	//go:embed chaos_attempt_details.sql
	ChaosAttemptDetails string

	// CountOpen counts the intents still PENDING or SENDING.
	//
	//go:embed count_open.sql
	CountOpen string
)
