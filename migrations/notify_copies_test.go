package migrations_test

import (
	"context"
	"testing"

	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/migrations"
)

// TestNotifyCopiesMasksEarlierNotifications: migration 009 masks, in the
// notifications written before it, the error each copied from a source whose
// channel redacts fields: the source's values where the source is still
// there, the whole error where it is gone. Nothing else changes.
func TestNotifyCopiesMasksEarlierNotifications(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	const number = "+15557654321"
	const failed = "The 'To' number " + number + " is not a valid phone number"
	for _, q := range []string{
		`INSERT INTO effectd.channels (name, provider, policy, redact, notify) VALUES
		   ('sms', 'twilio', '{}', '{to,body}', '{"channel":"hook","on":["failed"]}'),
		   ('plain', 'twilio', '{}', '{}', '{"channel":"hook","on":["failed"]}'),
		   ('hook', 'webhook', '{}', '{}', NULL),
		   ('other-hook', 'webhook', '{}', '{}', NULL)`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO effectd.intents (id, event_id, channel, payload, idempotency_key, status, last_error) OVERRIDING SYSTEM VALUE
		VALUES (1, 'otp', 'sms', jsonb_build_object('to', $1::text, 'body', 'code 424242'), 'sms:otp', 'FAILED', $2)`, number, failed); err != nil {
		t.Fatal(err)
	}
	notification := func(id int64, channel, source, sourceChannel string) {
		t.Helper()
		_, err := pool.Exec(ctx, `INSERT INTO effectd.intents (id, event_id, channel, payload, idempotency_key, status) OVERRIDING SYSTEM VALUE
			VALUES ($1::bigint, 'n' || $1::bigint, $2::text, jsonb_build_object('type', 'effect.failed',
			  'intent', jsonb_build_object('id', $3::jsonb, 'channel', $4::text, 'last_error', $5::text)), $2::text || ':n' || $1::bigint, 'SENT')`,
			id, channel, source, sourceChannel, failed)
		if err != nil {
			t.Fatal(err)
		}
	}
	notification(10, "hook", "1", "sms")       // its source is there: the number masked
	notification(11, "hook", "999", "sms")     // its source is gone: the error masked whole
	notification(12, "hook", `"1x"`, "sms")    // not an id: as good as gone
	notification(13, "hook", "1", "plain")     // plain redacts nothing
	notification(14, "other-hook", "1", "sms") // no channel notifies there
	sql, err := migrations.FS.ReadFile("009_notify_copies.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, string(sql)); err != nil {
		t.Fatalf("migration 009 again: %v", err)
	}
	for id, want := range map[int64]string{
		10: "The 'To' number *** is not a valid phone number",
		11: "***",
		12: "***",
		13: failed,
		14: failed,
	} {
		var got string
		if err := pool.QueryRow(ctx, `SELECT payload #>> '{intent,last_error}' FROM effectd.intents WHERE id = $1`, id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("notification %d: last_error %q, want %q", id, got, want)
		}
	}
}
