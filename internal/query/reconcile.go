package query

import _ "embed"

// SelectForReconcile reads intent $1 as an operator's reconcile needs it,
// with lease_expires_at only while the lease is live.
//
//go:embed reconcile_read.sql
var SelectForReconcile string
