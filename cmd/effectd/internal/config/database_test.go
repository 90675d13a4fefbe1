package config

import (
	"os"
	"strings"
	"testing"

	"github.com/effectd/effectd/migrations"
)

// TestParseCitus: database.citus is read into the distributed mode; absent, it
// is single-node mode; each malformed field is refused naming it and its line.
func TestParseCitus(t *testing.T) {
	hook := "channels:\n  x:\n    provider: webhook\n    webhook: {url: 'http://127.0.0.1:1/x', secret_env: HOOK_SECRET}\n"
	c, err := ParseCitus([]byte(hook))
	if err != nil || c != nil {
		t.Fatalf("without database.citus: %+v, %v; want nil, nil", c, err)
	}
	c, err = ParseCitus([]byte(hook + "database:\n  citus:\n    colocate_with: producer.orders\n    bucket_column: bucket\n    buckets: 32\n"))
	want := migrations.Citus{Schema: "producer", Table: "orders", Column: "bucket", Buckets: 32, PartitionDays: migrations.DefaultPartitionDays}
	if err != nil || c == nil || *c != want {
		t.Fatalf("ParseCitus = %+v, %v; want %+v", c, err, want)
	}
	c, err = ParseCitus([]byte(hook + "database:\n  citus:\n    colocate_with: producer.orders\n    bucket_column: bucket\n    buckets: 32\n    partition_days: 1\n"))
	if want.PartitionDays = 1; err != nil || c == nil || *c != want {
		t.Fatalf("ParseCitus with partition_days = %+v, %v; want %+v", c, err, want)
	}
	for _, tc := range []struct{ name, citus, want string }{
		{"no table", "bucket_column: b, buckets: 4", "database.citus.colocate_with: line 6: is required"},
		{"unqualified", "colocate_with: orders, bucket_column: b, buckets: 4", "database.citus.colocate_with: line 6: want schema.table"},
		{"upper case", "colocate_with: P.Orders, bucket_column: b, buckets: 4", "database.citus.colocate_with: line 6: want schema.table"},
		{"quote in name", "colocate_with: \"p.o'x\", bucket_column: b, buckets: 4", "database.citus.colocate_with: line 6: want schema.table"},
		{"effectd's own", "colocate_with: effectd.intents, bucket_column: b, buckets: 4", "database.citus.colocate_with: line 6: names one of effectd's own tables"},
		{"no column", "colocate_with: p.o, buckets: 4", "database.citus.bucket_column: line 6: is required"},
		{"bad column", "colocate_with: p.o, bucket_column: 'b; drop', buckets: 4", "database.citus.bucket_column: line 6: want a column name"},
		{"no buckets", "colocate_with: p.o, bucket_column: b", "database.citus.buckets: line 6: want 1 to 4096"},
		{"too many", "colocate_with: p.o, bucket_column: b, buckets: 5000", "database.citus.buckets: line 6: want 1 to 4096"},
		{"not a number", "colocate_with: p.o, bucket_column: b, buckets: many", "database.citus.buckets: line 6: cannot unmarshal"},
		{"no days", "colocate_with: p.o, bucket_column: b, buckets: 4, partition_days: 0", "database.citus.partition_days: line 6: want 1 to 31"},
		{"too many days", "colocate_with: p.o, bucket_column: b, buckets: 4, partition_days: 32", "database.citus.partition_days: line 6: want 1 to 31"},
		{"unknown key", "colocate_with: p.o, bucket_column: b, buckets: 4, shards: 2", "database.citus: line 6: field shards not found"},
	} {
		_, err := ParseCitus([]byte(hook + "database:\n  citus: {" + tc.citus + "}\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v; want it to contain %q", tc.name, err, tc.want)
		}
	}
	// a channel's notify works in this mode too: the statements that reach an
	// outcome write its notifications (dispatcher.TestCitusNotify)
	notify := "channels:\n  n:\n    provider: webhook\n    webhook: {url: 'http://127.0.0.1:1/n', secret_env: HOOK_SECRET}\n" +
		"  x:\n    provider: webhook\n    webhook: {url: 'http://127.0.0.1:1/x', secret_env: HOOK_SECRET}\n    notify: {channel: n, on: [sent]}\n"
	if c, err := ParseCitus([]byte(notify + "database:\n  citus: {colocate_with: p.o, bucket_column: b, buckets: 4}\n")); err != nil || c == nil {
		t.Errorf("notify with database.citus: %+v, %v; want the mode", c, err)
	}
	// LoadAll reads the section too, and Parse (the channels) ignores it.
	if _, err := Parse([]byte(hook+"database:\n  citus: {colocate_with: p.o, bucket_column: b, buckets: 4}\n"), getenv); err != nil {
		t.Errorf("Parse with database.citus: %v", err)
	}
}

// TestParseStorage: database.storage is auto when absent, reads each of its
// three values, and refuses any other, single beside database.citus and citus
// without it, naming the field and its line.
func TestParseStorage(t *testing.T) {
	hook := "channels:\n  x:\n    provider: webhook\n    webhook: {url: 'http://127.0.0.1:1/x', secret_env: HOOK_SECRET}\n"
	citus := "  citus: {colocate_with: p.o, bucket_column: b, buckets: 4}\n"
	for _, tc := range []struct{ name, database string }{
		{"absent", ""},
		{"auto", "database:\n  storage: auto\n"},
		{"auto beside citus", "database:\n  storage: auto\n" + citus},
		{"single", "database:\n  storage: single\n"},
		{"citus", "database:\n  storage: citus\n" + citus},
	} {
		got, err := ParseStorage([]byte(hook + tc.database))
		want := map[string]Storage{"absent": StorageAuto, "auto": StorageAuto, "auto beside citus": StorageAuto,
			"single": StorageSingle, "citus": StorageCitus}[tc.name]
		if err != nil || got != want {
			t.Errorf("%s: ParseStorage = %q, %v; want %q", tc.name, got, err, want)
		}
	}
	for _, tc := range []struct{ name, database, want string }{
		{"unknown", "database:\n  storage: sharded\n", `database.storage: line 6: want auto, single or citus, got "sharded"`},
		{"upper case", "database:\n  storage: Citus\n" + citus, `database.storage: line 6: want auto, single or citus, got "Citus"`},
		{"a list", "database:\n  storage: [single]\n", "database.storage: line 6: cannot unmarshal"},
		{"single beside citus", "database:\n  storage: single\n" + citus, "database.storage: line 6: is single, but database.citus is set"},
		{"citus alone", "database:\n  storage: citus\n", "database.storage: line 6: is citus, which needs database.citus"},
	} {
		_, err := ParseStorage([]byte(hook + tc.database))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v; want it to contain %q", tc.name, err, tc.want)
		}
	}
	// LoadAll reads it with the rest.
	path := t.TempDir() + "/effectd.yaml"
	if err := os.WriteFile(path, []byte(hook+"database:\n  storage: single\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if l, err := LoadAll(path, getenv); err != nil || l.Storage != StorageSingle {
		t.Errorf("LoadAll: Storage %q, %v; want single", l.Storage, err)
	}
}
