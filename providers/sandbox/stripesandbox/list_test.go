package stripesandbox

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestListCreatedRange: a list filtered by created takes Stripe's
// created, created[gt], created[gte], created[lt] and created[lte], each
// bound as Stripe reads it, together with starting_after pagination; a value
// that is not an integer is a 400 naming the parameter.
func TestListCreatedRange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, srv, advance := setup(t, 0)
	var at []int64 // created of refund i
	for i := range 5 {
		a := do(t, ctx, srv, http.MethodPost, "/v1/refunds", fmt.Sprint("k", i), refundForm)
		at = append(at, int64(a.body["created"].(float64)))
		advance(10 * time.Second)
	}
	list := func(q url.Values) []int64 {
		t.Helper()
		var got []int64
		q.Set("limit", "2")
		for {
			a := do(t, ctx, srv, http.MethodGet, "/v1/refunds", "", q)
			if a.status != http.StatusOK {
				t.Fatalf("list %v: %d %v", q, a.status, a.body)
			}
			data := a.body["data"].([]any)
			for _, d := range data {
				got = append(got, int64(d.(map[string]any)["created"].(float64)))
			}
			if a.body["has_more"] != true {
				return got
			}
			q.Set("starting_after", data[len(data)-1].(map[string]any)["id"].(string))
		}
	}
	s := func(n int64) string { return strconv.FormatInt(n, 10) }
	for _, c := range []struct {
		q    url.Values
		want []int64
	}{
		{url.Values{}, []int64{at[4], at[3], at[2], at[1], at[0]}},
		{url.Values{"created": {s(at[2])}}, []int64{at[2]}},
		{url.Values{"created[gte]": {s(at[1])}, "created[lt]": {s(at[3])}}, []int64{at[2], at[1]}},
		{url.Values{"created[gt]": {s(at[1])}, "created[lte]": {s(at[3])}}, []int64{at[3], at[2]}},
		{url.Values{"created[lt]": {s(at[0])}}, nil},
	} {
		if got := list(c.q); !slices.Equal(got, c.want) {
			t.Errorf("list %v: created %v, want %v", c.q, got, c.want)
		}
	}
	a := do(t, ctx, srv, http.MethodGet, "/v1/refunds", "", url.Values{"created[lt]": {"soon"}})
	if a.status != http.StatusBadRequest || a.errField("param") != "created[lt]" {
		t.Errorf("created[lt]=soon: %d %v, want 400 naming created[lt]", a.status, a.body)
	}
}
