package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"

	"github.com/effectd/effectd/effectdtype"
)

// ApprovalRequest is an operator action on a two-person channel waiting for
// (or given) a second person's decision.
type ApprovalRequest = effectdtype.ApprovalRequest

// ApprovalPage is a page of pending approval requests.
type ApprovalPage = effectdtype.ApprovalPage

// Requested is the answer (202 Accepted) of an action that a two-person
// channel turned into an approval request instead of running it: Retry,
// Cancel, Resolve, PatchPolicy and ApplyBulk return it as their error, and
// nothing changed yet. errors.As finds it.
type Requested struct {
	Request ApprovalRequest `json:"approval_request"`
	Message string          `json:"message"`
}

func (r *Requested) Error() string { return r.Message }

// Approvals lists the pending, unexpired approval requests of the channels
// the token sees (channel: one of them; "": all), oldest first, after id
// after, at most limit (0: the server's default).
func (c *Client) Approvals(ctx context.Context, channel string, after int64, limit int) (p ApprovalPage, err error) {
	q := url.Values{}
	if channel != "" {
		q.Set("channel", channel)
	}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/v1/approvals"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return p, c.do(ctx, "GET", path, nil, &p)
}

// Approval returns one approval request.
func (c *Client) Approval(ctx context.Context, id int64) (a ApprovalRequest, err error) {
	return a, c.do(ctx, "GET", fmt.Sprintf("/v1/approvals/%d", id), nil, &a)
}

// Approve approves another person's request with a reason: its action runs
// now, or the request fails (409) when its intent or channel moved on.
func (c *Client) Approve(ctx context.Context, id int64, reason string) (a ApprovalRequest, err error) {
	return a, c.do(ctx, "POST", fmt.Sprintf("/v1/approvals/%d/approve", id), map[string]string{"reason": reason}, &a)
}

// Reject rejects another person's request with a reason.
func (c *Client) Reject(ctx context.Context, id int64, reason string) (a ApprovalRequest, err error) {
	return a, c.do(ctx, "POST", fmt.Sprintf("/v1/approvals/%d/reject", id), map[string]string{"reason": reason}, &a)
}

// PatchPolicyWithReason is PatchPolicy with the reason a two-person
// channel's policy change needs: it then becomes an approval request
// (*Requested).
func (c *Client) PatchPolicyWithReason(ctx context.Context, name string, patch json.RawMessage, reason string) (ch Channel, err error) {
	path := "/v1/channels/" + url.PathEscape(name) + "/policy"
	if reason != "" {
		path += "?reason=" + url.QueryEscape(reason)
	}
	return ch, c.do(ctx, "PATCH", path, patch, &ch)
}

// ApplyBulkWithReason is ApplyBulk with a reason, which a bulk action that
// becomes an approval request (*Requested) needs.
func (c *Client) ApplyBulkWithReason(ctx context.Context, snapshot, reason string) (r BulkResult, err error) {
	return r, c.do(ctx, "POST", "/v1/intents/bulk/"+url.PathEscape(snapshot)+"/apply", map[string]string{"reason": reason}, &r)
}
