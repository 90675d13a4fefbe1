package channeldb

import (
	"context"
	_ "embed"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
)

// The reads and writes of effectd.channels: the registration from the
// configuration, the policy and pause flag every instance rereads, and an
// operator's changes.

//go:embed register.sql
var registerSQL string

//go:embed channel_set_redact.sql
var setRedactSQL string

//go:embed channels.sql
var channelsSQL string

//go:embed channel_get.sql
var channelGetSQL string

//go:embed channel_lock.sql
var channelLockSQL string

//go:embed channel_list.sql
var channelListSQL string

//go:embed channel_set_override.sql
var channelSetOverrideSQL string

//go:embed channel_set_paused.sql
var channelSetPausedSQL string

//go:embed channel_exists.sql
var channelExistsSQL string

//go:embed channel_names.sql
var channelNamesSQL string

//go:embed channel_redact.sql
var channelRedactSQL string

// Registration is a channel as the configuration declares it.
type Registration struct {
	Name       string
	Provider   string
	Policy     []byte // JSON: the policy the YAML sets
	MaxPayload int
	Notify     []byte // JSON; nil: none
}

// Register upserts channel r; a row that already says the same is not
// touched, and an operator's override and pause are kept.
func Register(ctx context.Context, db query.DB, r Registration) error {
	_, err := db.Exec(ctx, registerSQL, r.Name, r.Provider, r.Policy, r.MaxPayload, r.Notify)
	return err
}

//go:embed analyze_small.sql
var analyzeSmallSQL string

// AnalyzeSmallTables gathers the planner's statistics for the channels and
// their rate tokens once they are registered.
func AnalyzeSmallTables(ctx context.Context, db query.DB) error {
	_, err := db.Exec(ctx, analyzeSmallSQL)
	return err
}

// SetRedact stores the payload fields channel masks for those who may not
// read them.
func SetRedact(ctx context.Context, db query.DB, channel string, fields []string) error {
	_, err := db.Exec(ctx, setRedactSQL, channel, append([]string{}, fields...)) // never NULL
	return err
}

// ChannelPolicy is what every instance rereads of a channel.
type ChannelPolicy struct {
	Name           string `db:"name"`
	Provider       string `db:"provider"`
	Policy         []byte `db:"policy"`          // JSON: the YAML's
	PolicyOverride []byte `db:"policy_override"` // JSON: an operator's; nil: none
	Paused         bool   `db:"paused"`
}

// ChannelPolicies reads every registered channel's policy and pause flag.
func ChannelPolicies(ctx context.Context, db query.DB) ([]ChannelPolicy, error) {
	rows, err := db.Query(ctx, channelsSQL)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[ChannelPolicy])
}

// ChannelRow is one row of effectd.channels as an operator sees it.
type ChannelRow struct {
	Name      string    `db:"name"`
	Provider  string    `db:"provider"`
	Policy    []byte    `db:"policy"`          // JSON: the YAML's
	Override  []byte    `db:"policy_override"` // JSON: an operator's; nil: none
	Paused    bool      `db:"paused"`
	UpdatedAt time.Time `db:"updated_at"`
}

// SelectChannel reads channel name; pgx.ErrNoRows when there is none.
func SelectChannel(ctx context.Context, db query.DB, name string) (ChannelRow, error) {
	return oneChannel(db.Query(ctx, channelGetSQL, name))
}

// LockChannel reads channel name and locks its row until db's transaction
// ends; pgx.ErrNoRows when there is none.
func LockChannel(ctx context.Context, db query.DB, name string) (ChannelRow, error) {
	return oneChannel(db.Query(ctx, channelLockSQL, name))
}

// oneChannel reads the first row of rows, by column name; pgx.ErrNoRows when
// there is none.
func oneChannel(rows pgx.Rows, err error) (ChannelRow, error) {
	if err != nil {
		return ChannelRow{}, err
	}
	return pgx.CollectOneRow(rows, pgx.RowToStructByName[ChannelRow])
}

// ListChannels reads every registered channel, by name.
func ListChannels(ctx context.Context, db query.DB) ([]ChannelRow, error) {
	rows, err := db.Query(ctx, channelListSQL)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[ChannelRow])
}

// SetOverride stores override as channel's run-time policy override.
func SetOverride(ctx context.Context, db query.DB, channel string, override map[string]json.RawMessage) error {
	_, err := db.Exec(ctx, channelSetOverrideSQL, channel, override)
	return err
}

// SetPaused pauses or resumes channel.
func SetPaused(ctx context.Context, db query.DB, channel string, paused bool) error {
	_, err := db.Exec(ctx, channelSetPausedSQL, channel, paused)
	return err
}

// ChannelExists reports whether channel name is registered.
func ChannelExists(ctx context.Context, db query.DB, name string) (exists bool, err error) {
	err = db.QueryRow(ctx, channelExistsSQL, name).Scan(&exists)
	return exists, err
}

// ChannelNames lists the registered channels' names, in order.
func ChannelNames(ctx context.Context, db query.DB) ([]string, error) {
	rows, err := db.Query(ctx, channelNamesSQL)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Redactions lists every channel's redacted payload fields, by channel name.
func Redactions(ctx context.Context, db query.DB) ([]effectdtype.Redaction, error) {
	rows, err := db.Query(ctx, channelRedactSQL)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[effectdtype.Redaction])
}
