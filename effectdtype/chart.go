package effectdtype

import "time"

// ChartRanges are the ranges a chart may show, with the step of its points:
// a point a minute for an hour, read from the minute rollups; a point an
// hour for a day and a week, read from the hour rollups, so that a chart
// reads a number of rows fixed by its range (60, 24 or 168 per channel).
var ChartRanges = map[string]ChartRange{
	"1h":  {Range: time.Hour, Step: time.Minute},
	"24h": {Range: 24 * time.Hour, Step: time.Hour},
	"7d":  {Range: 7 * 24 * time.Hour, Step: time.Hour},
}

// ChartRange is how long a chart reaches back and the step of its points.
type ChartRange struct {
	Range, Step time.Duration
}

// Chart is what the console's charts draw for one channel or the whole
// system over a range: a point a step, and the audit entries in the range.
type Chart struct {
	Channel     string       `json:"channel,omitempty"` // "": the whole system (the caller's channels)
	Range       string       `json:"range"`             // 1h, 24h or 7d
	From        time.Time    `json:"from"`              // the first point's start
	To          time.Time    `json:"to"`                // the last point's end
	StepSeconds int64        `json:"step_seconds"`
	Points      []ChartPoint `json:"points"`
	Marks       []ChartMark  `json:"marks"` // newest first, at most ChartMarksLimit
}

// ChartMarksLimit is how many audit entries a chart marks at most.
const ChartMarksLimit = 200

// ChartPoint is one step of a chart: what happened in it.
type ChartPoint struct {
	At             time.Time `json:"at"` // the step's start
	Sent           int64     `json:"sent"`
	Failed         int64     `json:"failed"`
	InDoubt        int64     `json:"in_doubt"`
	Skipped        int64     `json:"skipped"`
	Accepted       int64     `json:"accepted"`
	Delivered      int64     `json:"delivered"`
	Undelivered    int64     `json:"undelivered"`
	ProviderErrors int64     `json:"provider_errors"`
	Backoffs       int64     `json:"backoffs"`
	// Backlog and OldestDueSeconds are the largest sampled in the step;
	// absent when no sample was taken in it.
	Backlog          *int64   `json:"backlog,omitempty"`
	OldestDueSeconds *float64 `json:"oldest_due_seconds,omitempty"`
	// LatencyP50Ms and LatencyP99Ms are the quantiles of the latency from an
	// enqueue's commit to the provider answer that decided it, of the
	// intents decided in the step, within a factor of 1.19 (the middle of a
	// log-scale slot); absent when none was decided.
	LatencyP50Ms *float64 `json:"latency_p50_ms,omitempty"`
	LatencyP99Ms *float64 `json:"latency_p99_ms,omitempty"`
	Decided      int64    `json:"decided"` // intents whose latency the quantiles are of
}

// ChartMark is an audit entry (an operator action or a policy change) in a
// chart's range.
type ChartMark struct {
	At       time.Time `json:"at"`
	Actor    string    `json:"actor"`
	Action   string    `json:"action"`
	Channel  string    `json:"channel,omitempty"`
	IntentID *int64    `json:"intent_id,omitempty"`
}
