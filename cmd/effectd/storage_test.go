package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/effectd/effectd/cmd/effectd/internal/config"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/migrations"
)

// TestStorageMode: on one PostgreSQL, serve's start-up refuses
// database.storage: citus naming the field, and with auto or single decides
// single-node mode, logged once with where the mode came from.
func TestStorageMode(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	citus := &migrations.Citus{Schema: "producer", Table: "orders", Column: "bucket", Buckets: 4}
	var logs strings.Builder
	o := serveOptions{log: slog.New(slog.NewJSONHandler(&logs, nil)), storage: config.StorageCitus, citus: citus}
	_, err := storageMode(ctx, pool, o)
	if want := "database.storage is citus, but the database is in single mode"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("storage citus on one PostgreSQL: err = %v; want it to contain %q", err, want)
	}
	for _, tc := range []struct {
		storage config.Storage
		source  string
	}{{"", "detected"}, {config.StorageAuto, "detected"}, {config.StorageSingle, "configured"}} {
		logs.Reset()
		o := serveOptions{log: slog.New(slog.NewJSONHandler(&logs, nil)), storage: tc.storage}
		buckets, err := storageMode(ctx, pool, o)
		if err != nil || buckets != 0 {
			t.Fatalf("storage %q: %d buckets, %v; want 0, nil", tc.storage, buckets, err)
		}
		want := `"msg":"storage mode","mode":"single","source":"` + tc.source + `","buckets":0`
		if strings.Count(logs.String(), `"msg":"storage mode"`) != 1 || !strings.Contains(logs.String(), want) {
			t.Errorf("storage %q: logged %s; want one line with %s", tc.storage, logs.String(), want)
		}
	}
}
