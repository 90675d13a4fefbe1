package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/effectd/effectd/effectdtype"
)

// Client calls the admin API at BaseURL.
type Client struct {
	BaseURL string       // e.g. http://127.0.0.1:8080
	Token   string       // bearer token; empty sends none
	HTTP    *http.Client // nil: a client with a 30 s timeout
}

// Error is an error answered by the API.
type Error struct {
	Status  int    // HTTP status
	Code    string // e.g. not_found, conflict, invalid
	Message string // on one line
}

// Error returns "<code>: <message>".
func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// maxForeignMessage bounds the message of an answer that is not the API's
// JSON (a proxy's HTML page, say).
const maxForeignMessage = 200

// oneLine returns s with every run of white space (line breaks included) as one space.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

var defaultHTTP = &http.Client{Timeout: 30 * time.Second}

// do sends a request with body (nil for none) encoded as JSON and decodes
// the answer into out (nil to discard it).
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := cmp.Or(c.HTTP, defaultHTTP).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error Error `json:"error"`
		}
		if json.Unmarshal(b, &e) != nil || e.Error.Code == "" {
			msg := []rune(oneLine(string(b)))
			if len(msg) > maxForeignMessage {
				msg = append(msg[:maxForeignMessage], '…')
			}
			return &Error{Status: resp.StatusCode, Code: "http_" + strconv.Itoa(resp.StatusCode),
				Message: cmp.Or(string(msg), http.StatusText(resp.StatusCode))}
		}
		e.Error.Status, e.Error.Message = resp.StatusCode, oneLine(e.Error.Message)
		return &e.Error
	}
	if resp.StatusCode == http.StatusAccepted { // the action became an approval request
		var req Requested
		if err := json.Unmarshal(b, &req); err != nil || req.Request.ID == 0 {
			return fmt.Errorf("%s %s: decoding the approval request: %v", method, path, err)
		}
		return &req
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

// IntentRow is one intent as the API shows it.
type IntentRow = effectdtype.IntentRow

// Attempt is one provider call, lookup, callback or operator action on an intent.
type Attempt = effectdtype.Attempt

// AuditEntry is one change made through the API.
type AuditEntry = effectdtype.AuditEntry

// ProviderEvent is an event a provider sent (a Twilio status callback, a Stripe event).
type ProviderEvent = effectdtype.ProviderEvent

// IntentDetail is one intent with its history.
type IntentDetail = effectdtype.IntentDetail

// ProviderEvents returns the first page of provider events about an intent.
func (c *Client) ProviderEvents(ctx context.Context, intentID int64) ([]ProviderEvent, error) {
	var out effectdtype.ProviderEventPage
	return out.Events, c.do(ctx, "GET", fmt.Sprintf("/v1/provider-events?intent_id=%d&limit=200", intentID), nil, &out)
}

// IntentPage is one page of a list.
type IntentPage = effectdtype.IntentPage

// Filter selects intents in a list. Empty fields select everything.
type Filter struct {
	Status   string
	Channel  string
	EventID  string
	Delivery string
	Q        string    // an event id, idempotency key or provider reference
	Since    time.Time // created at or after
	Until    time.Time // created before
	Limit    int
	After    int64 // the Next of the previous page
}

// Query returns f as URL query parameters.
func (f Filter) Query() url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("status", f.Status)
	set("channel", f.Channel)
	set("event_id", f.EventID)
	set("delivery", f.Delivery)
	set("q", f.Q)
	if !f.Since.IsZero() {
		v.Set("since", f.Since.UTC().Format(time.RFC3339))
	}
	if !f.Until.IsZero() {
		v.Set("until", f.Until.UTC().Format(time.RFC3339))
	}
	if f.Limit > 0 {
		v.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.After > 0 {
		v.Set("after", strconv.FormatInt(f.After, 10))
	}
	return v
}

// ListIntents returns one page of intents matching f.
func (c *Client) ListIntents(ctx context.Context, f Filter) (p IntentPage, err error) {
	path := "/v1/intents"
	if q := f.Query().Encode(); q != "" {
		path += "?" + q
	}
	return p, c.do(ctx, "GET", path, nil, &p)
}

// Intent returns one intent with its attempts, audit and provider events.
func (c *Client) Intent(ctx context.Context, id int64) (d IntentDetail, err error) {
	return d, c.do(ctx, "GET", fmt.Sprintf("/v1/intents/%d", id), nil, &d)
}

type reasonBody struct {
	Reason string `json:"reason,omitempty"`
}

// Retry moves a FAILED, SKIPPED or IN_DOUBT intent back to PENDING; force
// (with a reason) sends again past the provider's idempotency-key window.
func (c *Client) Retry(ctx context.Context, id int64, reason string, force bool) (in IntentRow, err error) {
	body := struct {
		Reason string `json:"reason,omitempty"`
		Force  bool   `json:"force,omitempty"`
	}{reason, force}
	return in, c.do(ctx, "POST", shown(ctx, fmt.Sprintf("/v1/intents/%d/retry", id)), body, &in)
}

// Cancel moves a PENDING intent to CANCELLED.
func (c *Client) Cancel(ctx context.Context, id int64, reason string) (in IntentRow, err error) {
	return in, c.do(ctx, "POST", shown(ctx, fmt.Sprintf("/v1/intents/%d/cancel", id)), reasonBody{reason}, &in)
}

// Resolution settles an IN_DOUBT (or stuck SENDING) intent.
type Resolution struct {
	As          string `json:"as"`                     // sent | resend | skip
	ProviderRef string `json:"provider_ref,omitempty"` // with sent: the provider's reference
	Reason      string `json:"reason,omitempty"`       // why, for the audit
	Force       bool   `json:"force,omitempty"`        // with resend: past the provider's key window
}

// Resolve settles an IN_DOUBT (or stuck SENDING) intent.
func (c *Client) Resolve(ctx context.Context, id int64, r Resolution) (in IntentRow, err error) {
	return in, c.do(ctx, "POST", shown(ctx, fmt.Sprintf("/v1/intents/%d/resolve", id)), r, &in)
}

// shownEventKey is the context key of ShownEvent.
type shownEventKey struct{}

// ShownEvent returns ctx carrying the producer's event id the operator was
// shown for the intent they act on: Retry, Cancel and Resolve then send it
// (?event_id=), and the server answers 404, changing nothing, when the
// intent's id now names another event (an id is handed out again after a
// failover that lost the intent the operator saw).
func ShownEvent(ctx context.Context, eventID string) context.Context {
	return context.WithValue(ctx, shownEventKey{}, eventID)
}

// shown is path with ctx's ShownEvent as ?event_id=, if any.
func shown(ctx context.Context, path string) string {
	if e, _ := ctx.Value(shownEventKey{}).(string); e != "" {
		return path + "?event_id=" + url.QueryEscape(e)
	}
	return path
}

// ReconcileResult is what a reconcile found and did.
type ReconcileResult = effectdtype.ReconcileResult

// Reconcile asks the provider about an intent now; dryRun reports without changing anything.
func (c *Client) Reconcile(ctx context.Context, id int64, dryRun bool) (s ReconcileResult, err error) {
	return s, c.do(ctx, "POST", fmt.Sprintf("/v1/intents/%d/reconcile?dry_run=%t", id, dryRun), nil, &s)
}

// Channel is a channel with its effective policy and live counts.
type Channel = effectdtype.Channel

// Channels returns every channel the token may see.
func (c *Client) Channels(ctx context.Context) ([]Channel, error) {
	var out struct {
		Channels []Channel `json:"channels"`
	}
	return out.Channels, c.do(ctx, "GET", "/v1/channels", nil, &out)
}

// Channel returns one channel.
func (c *Client) Channel(ctx context.Context, name string) (ch Channel, err error) {
	return ch, c.do(ctx, "GET", "/v1/channels/"+url.PathEscape(name), nil, &ch)
}

// Pause stops every instance from claiming the channel's intents.
func (c *Client) Pause(ctx context.Context, name string) (ch Channel, err error) {
	return ch, c.do(ctx, "POST", "/v1/channels/"+url.PathEscape(name)+"/pause", nil, &ch)
}

// Resume restarts claiming the channel's intents.
func (c *Client) Resume(ctx context.Context, name string) (ch Channel, err error) {
	return ch, c.do(ctx, "POST", "/v1/channels/"+url.PathEscape(name)+"/resume", nil, &ch)
}

// PatchPolicy changes policy fields of a channel (a field set to null drops its override).
func (c *Client) PatchPolicy(ctx context.Context, name string, patch json.RawMessage) (ch Channel, err error) {
	return ch, c.do(ctx, "PATCH", "/v1/channels/"+url.PathEscape(name)+"/policy", patch, &ch)
}

// ChannelStats is one channel's counts and gauges in Stats.
type ChannelStats = effectdtype.ChannelStats

// Stats is the answer of GET /v1/stats.
type Stats = effectdtype.Stats

// Stats returns counts by channel and status and the gauges operators watch.
func (c *Client) Stats(ctx context.Context) (s Stats, err error) {
	return s, c.do(ctx, "GET", "/v1/stats", nil, &s)
}

// Chart is a channel's or the whole system's chart over a range.
type Chart = effectdtype.Chart

// Charts reads the chart of channel ("": the whole system) over rangeName
// (1h, 24h or 7d).
func (c *Client) Charts(ctx context.Context, channel, rangeName string) (ch Chart, err error) {
	q := url.Values{"range": {rangeName}}
	if channel != "" {
		q.Set("channel", channel)
	}
	return ch, c.do(ctx, "GET", "/v1/charts?"+q.Encode(), nil, &ch)
}

// BulkRequest asks for a bulk action's snapshot.
type BulkRequest = effectdtype.BulkRequest

// BulkFilter selects the intents of a bulk action.
type BulkFilter = effectdtype.BulkFilter

// BulkSnapshot is a frozen selection, not yet applied.
type BulkSnapshot = effectdtype.BulkSnapshot

// BulkResult is what applying a snapshot did.
type BulkResult = effectdtype.BulkResult

// Bulk freezes the intents a bulk action would change, changing nothing.
func (c *Client) Bulk(ctx context.Context, req BulkRequest) (s BulkSnapshot, err error) {
	return s, c.do(ctx, "POST", "/v1/intents/bulk", req, &s)
}

// ApplyBulk applies a snapshot.
func (c *Client) ApplyBulk(ctx context.Context, snapshot string) (r BulkResult, err error) {
	return r, c.do(ctx, "POST", "/v1/intents/bulk/"+url.PathEscape(snapshot)+"/apply", nil, &r)
}
