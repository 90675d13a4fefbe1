package stripe

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestStripeMockList: List's requests (refunds, payment intents and transfers
// filtered by created[gte] and created[lt], limit 100) are valid by Stripe's
// OpenAPI description, as stripe-mock checks them. Its fixtures carry none of
// our metadata: nothing is listed.
func TestStripeMockList(t *testing.T) {
	if testing.Short() {
		t.Skip("stripe-mock test skipped in -short mode")
	}
	url := startStripeMock(t)
	p, err := New(Config{APIKey: "sk_test_123", BaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	objs, err := p.List(context.Background(), now.Add(-24*time.Hour), now)
	var se *Error
	switch {
	case errors.As(err, &se):
		t.Fatalf("stripe-mock refused the listing: %v", err)
	case err != nil:
		t.Fatal(err)
	case len(objs) != 0:
		t.Errorf("listed %+v from stripe-mock's fixtures, which carry no effectd metadata", objs)
	}
}
