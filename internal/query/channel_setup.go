package query

import _ "embed"

// SetRedact stores channel $1's redacted payload fields $2 (a text array,
// never NULL).
//
//go:embed channel_set_redact.sql
var SetRedact string

// EnsureRateBucket creates channel $1's shared rate bucket unless it exists.
//
//go:embed rate_bucket_ensure.sql
var EnsureRateBucket string
