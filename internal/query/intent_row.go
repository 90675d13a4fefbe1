package query

import (
	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/effectdtype"
)

// ScanIntent reads one whole intent. A time that Go and JSON cannot carry does
// not fail the read: it is clamped and named in Problems.
func ScanIntent(row pgx.Row) (effectdtype.IntentRow, error) {
	var r effectdtype.IntentRow
	next, lease, claimed := LooseTime{Field: "next_attempt_at"}, LooseTime{Field: "lease_expires_at"}, LooseTime{Field: "claimed_at"}
	occurred, created, updated := LooseTime{Field: "occurred_at"}, LooseTime{Field: "created_at"}, LooseTime{Field: "updated_at"}
	delivery := LooseTime{Field: "delivery_at"}
	err := row.Scan(&r.ID, &r.EventID, &r.Channel, &r.Payload, &r.Status, &r.Attempts, &next,
		&lease, &claimed, &r.IdempotencyKey, &r.ProviderRef, &r.LastError, &r.OrderingKey,
		&occurred, &created, &updated, &r.Delivery, &r.DeliveryDetail, &delivery)
	r.NextAttemptAt, r.LeaseExpiresAt, r.ClaimedAt = next.Time, lease.Ptr(), claimed.Ptr()
	r.OccurredAt, r.CreatedAt, r.UpdatedAt, r.DeliveryAt = occurred.Ptr(), created.Time, updated.Time, delivery.Ptr()
	r.Problems = problems(&next, &lease, &claimed, &occurred, &created, &updated, &delivery)
	return r, err
}

// CollectIntents reads every row of rows as a whole intent.
func CollectIntents(rows pgx.Rows) ([]effectdtype.IntentRow, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (effectdtype.IntentRow, error) { return ScanIntent(row) })
}
