package query

import (
	"context"
	_ "embed"
)

// Session advisory locks, by which one instance at a time polls deliveries,
// prunes, or sweeps on schedule. A session lock belongs to the connection
// that took it: take and release it through the same one.

//go:embed try_lock.sql
var tryLockSQL string

//go:embed unlock.sql
var unlockSQL string

// TryLock takes session advisory lock key if it is free, and reports whether it did.
func TryLock(ctx context.Context, db DB, key int64) (got bool, err error) {
	err = db.QueryRow(ctx, tryLockSQL, key).Scan(&got)
	return got, err
}

// Unlock releases session advisory lock key.
func Unlock(ctx context.Context, db DB, key int64) error {
	_, err := db.Exec(ctx, unlockSQL, key)
	return err
}
