//go:build citus

package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/effectd/effectd/cmd/effectd/internal/config"
	"github.com/effectd/effectd/internal/citustest"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/migrations"
)

func init() { pgtest.AtExit(citustest.Stop) }

// TestCitusStorageMode: on a distributed database, serve's start-up refuses
// database.storage: single naming the field, and with auto or citus decides
// the distributed mode with its buckets, logged once with where it came from.
func TestCitusStorageMode(t *testing.T) {
	citustest.Cluster(t)
	pool := citustest.New(t)
	ctx := context.Background()
	citustest.ProducerOrders(t, pool)
	if err := migrations.New(pool).Up(ctx); err != nil {
		t.Fatal(err)
	}
	c := migrations.Citus{Schema: "producer", Table: "orders", Column: "bucket", Buckets: 8, PartitionDays: migrations.DefaultPartitionDays}
	if _, err := migrations.New(pool).Distribute(ctx, c); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	o := serveOptions{log: slog.New(slog.NewJSONHandler(&logs, nil)), storage: config.StorageSingle}
	_, err := storageMode(ctx, pool, o)
	if want := "database.storage is single, but the database is in citus mode"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("storage single on a distributed database: err = %v; want it to contain %q", err, want)
	}
	for _, tc := range []struct {
		storage config.Storage
		source  string
	}{{config.StorageAuto, "detected"}, {config.StorageCitus, "configured"}} {
		logs.Reset()
		o := serveOptions{log: slog.New(slog.NewJSONHandler(&logs, nil)), storage: tc.storage, citus: &c}
		buckets, err := storageMode(ctx, pool, o)
		if err != nil || buckets != c.Buckets {
			t.Fatalf("storage %q: %d buckets, %v; want %d, nil", tc.storage, buckets, err, c.Buckets)
		}
		want := `"msg":"storage mode","mode":"citus","source":"` + tc.source + `","buckets":8`
		if strings.Count(logs.String(), `"msg":"storage mode"`) != 1 || !strings.Contains(logs.String(), want) {
			t.Errorf("storage %q: logged %s; want one line with %s", tc.storage, logs.String(), want)
		}
	}
}
