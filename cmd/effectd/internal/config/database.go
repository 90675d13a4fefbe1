package config

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/effectd/effectd/migrations"
)

// DatabaseSpec is the database section of the YAML.
type DatabaseSpec struct {
	Storage string     `yaml:"storage"` // see ParseStorage
	Citus   *CitusSpec `yaml:"citus"`   // nil: single-node mode
}

// Storage is database.storage: the storage mode serve runs in.
type Storage string

// The values of database.storage.
const (
	StorageAuto   Storage = "auto"   // the mode the database is in, detected at start-up (the default)
	StorageSingle Storage = "single" // one PostgreSQL; a distributed database is refused
	StorageCitus  Storage = "citus"  // Citus, laid out as database.citus says; any other database is refused
)

// ParseStorage reads database.storage of a YAML document, StorageAuto when
// absent. An error names the field: a value other than auto, single or
// citus, single beside database.citus, or citus without it.
func ParseStorage(b []byte) (Storage, error) {
	var f File
	root, err := decodeDocument(b, &f)
	if err != nil {
		return "", err
	}
	s := Storage(f.Database.Storage)
	bad := func(msg string) error {
		p := []string{"database", "storage"}
		return &Error{Path: p, Line: lineOf(root, p), Msg: msg}
	}
	switch {
	case s == "":
		return StorageAuto, nil
	case s != StorageAuto && s != StorageSingle && s != StorageCitus:
		return "", bad(fmt.Sprintf("want auto, single or citus, got %s", quote(string(s))))
	case s == StorageSingle && f.Database.Citus != nil:
		return "", bad("is single, but database.citus is set: remove one of them")
	case s == StorageCitus && f.Database.Citus == nil:
		return "", bad("is citus, which needs database.citus (the producer's table effectd's tables are co-located with)")
	}
	return s, nil
}

// CitusSpec is database.citus as written in the YAML: the producer's
// distributed table effectd's large tables are co-located with.
type CitusSpec struct {
	ColocateWith string `yaml:"colocate_with"` // schema.table
	BucketColumn string `yaml:"bucket_column"` // its distribution column
	Buckets      int    `yaml:"buckets"`       // the producer uses bucket values 0..Buckets-1
	// PartitionDays is how many UTC days one partition of effectd's
	// distributed tables covers; nil: migrations.DefaultPartitionDays.
	PartitionDays *int `yaml:"partition_days"`
}

// MaxBuckets bounds database.citus.buckets: each bucket is a lease row, and
// every instance claims for each bucket it owns in turn.
const MaxBuckets = 4096

// identifier is an unquoted PostgreSQL identifier as effectd accepts one in
// the YAML: lower case, so that it names the same object quoted or not.
var identifier = regexp.MustCompile(`^[a-z_][a-z0-9_$]{0,62}$`)

// LoadCitus reads database.citus of the YAML at path; nil when absent.
func LoadCitus(path string) (*migrations.Citus, error) { return load(path, ParseCitus) }

// ParseCitus reads database.citus of a YAML document: nil when the section is
// absent (single-node mode), and an error naming the field when it is
// incomplete or malformed.
func ParseCitus(b []byte) (*migrations.Citus, error) {
	var f File
	root, err := decodeDocument(b, &f)
	if err != nil {
		return nil, err
	}
	s := f.Database.Citus
	if s == nil {
		return nil, nil
	}
	bad := func(key, msg string) error {
		p := []string{"database", "citus", key}
		return &Error{Path: p, Line: lineOf(root, p), Msg: shorten(msg)}
	}
	schema, table, ok := splitQualified(s.ColocateWith)
	switch {
	case s.ColocateWith == "":
		return nil, bad("colocate_with", "is required: the producer's distributed table, as schema.table")
	case !ok:
		return nil, bad("colocate_with", fmt.Sprintf("want schema.table in lower case, such as producer.orders, got %s", quote(s.ColocateWith)))
	case schema == "effectd":
		return nil, bad("colocate_with", "names one of effectd's own tables; name the producer's table")
	case s.BucketColumn == "":
		return nil, bad("bucket_column", "is required: the distribution column of "+s.ColocateWith)
	case !identifier.MatchString(s.BucketColumn):
		return nil, bad("bucket_column", fmt.Sprintf("want a column name in lower case, got %s", quote(s.BucketColumn)))
	case s.Buckets < 1 || s.Buckets > MaxBuckets:
		return nil, bad("buckets", fmt.Sprintf("want 1 to %d (the bucket values the producer uses are 0..buckets-1), got %d", MaxBuckets, s.Buckets))
	case s.PartitionDays != nil && (*s.PartitionDays < 1 || *s.PartitionDays > migrations.MaxPartitionDays):
		return nil, bad("partition_days", fmt.Sprintf("want 1 to %d (the UTC days one partition of intents, attempts and provider events covers; %d unless set), got %d",
			migrations.MaxPartitionDays, migrations.DefaultPartitionDays, *s.PartitionDays))
	}
	days := migrations.DefaultPartitionDays
	if s.PartitionDays != nil {
		days = *s.PartitionDays
	}
	return &migrations.Citus{Schema: schema, Table: table, Column: s.BucketColumn, Buckets: s.Buckets, PartitionDays: days}, nil
}

// splitQualified splits schema.table, each part an identifier.
func splitQualified(s string) (schema, table string, ok bool) {
	schema, table, ok = strings.Cut(s, ".")
	return schema, table, ok && identifier.MatchString(schema) && identifier.MatchString(table)
}
