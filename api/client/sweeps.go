package client

import (
	"context"
	"time"

	"github.com/effectd/effectd/effectdtype"
)

// SweepReport is what a reconciliation sweep found.
type SweepReport = effectdtype.SweepReport

// Sweep runs a reconciliation sweep of channel for the intents created in
// [since, until); a zero until means now. It changes nothing.
func (c *Client) Sweep(ctx context.Context, channel string, since, until time.Time) (r SweepReport, err error) {
	req := map[string]string{"channel": channel}
	if !since.IsZero() {
		req["since"] = since.UTC().Format(time.RFC3339Nano)
	}
	if !until.IsZero() {
		req["until"] = until.UTC().Format(time.RFC3339Nano)
	}
	return r, c.do(ctx, "POST", "/v1/sweeps", req, &r)
}
