package twilio

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	openapi "github.com/twilio/twilio-go/rest/api/v2010"

	"github.com/effectd/effectd/providers/effect"
)

// Listing bounds.
const (
	// ListLimit bounds how many messages List reads: a window holding more
	// fails, asking for a shorter one.
	ListLimit = 20000
	// ListTimeout bounds the whole listing, every page (or the per-call
	// timeout, when longer).
	ListTimeout = 2 * time.Minute
	// listSendSlack is how long after its creation a message may still be
	// queued: List reads messages sent up to this long after the window.
	listSendSlack = 10 * time.Minute
	// listQueuedLimit bounds the listing of the newest messages, where those
	// still queued (no date_sent yet) are.
	listQueuedLimit = 1000
)

// List returns the messages of the channel's sender (its From, else its
// messaging service) created in [since, until): those Twilio dates as sent
// from since to listSendSlack past until (Messages.json filtered by
// DateSent> and DateSent<, every page), and, when the window reaches that
// close to now, those still queued among the newest listQueuedLimit, or sent
// since the first listing. Twilio keeps no metadata: each message's Match is
// its recipient and body.
func (p *Provider) List(ctx context.Context, since, until time.Time) ([]effect.Object, error) {
	ctx, cancel := context.WithTimeout(ctx, max(p.timeout, ListTimeout))
	defer cancel()
	api, tr := p.api(ctx)
	params := func(limit int) *openapi.ListMessageParams {
		lp := &openapi.ListMessageParams{}
		lp.SetPageSize(min(limit, 1000)).SetLimit(limit)
		if p.cfg.From != "" {
			lp.SetFrom(p.cfg.From)
		}
		return lp
	}
	sent, err := api.ListMessage(params(ListLimit + 1).SetDateSentAfter(since.UTC()).SetDateSentBefore(until.Add(listSendSlack).UTC()))
	if err != nil {
		return nil, classify("list", "", err, tr)
	}
	if len(sent) > ListLimit {
		return nil, fmt.Errorf("twilio: list: more than %d messages sent between %s and %s: list a shorter window",
			ListLimit, since.UTC().Format(time.RFC3339), until.Add(listSendSlack).UTC().Format(time.RFC3339))
	}
	var queued []openapi.ApiV2010Message
	if time.Since(until) < listSendSlack {
		if queued, err = api.ListMessage(params(listQueuedLimit)); err != nil {
			return nil, classify("list", "", err, tr)
		}
	}
	var out []effect.Object
	seen := map[string]bool{}
	for _, msg := range append(sent, queued...) {
		sid := deref(msg.Sid)
		if sid == "" || seen[sid] {
			continue
		}
		// A message of the newest listing that the first did not show was
		// queued then, or has been sent since: a message that left the queue
		// between the two listings is in neither as the other reads it. The
		// window is judged by its creation below.
		seen[sid] = true
		if p.cfg.From == "" && deref(msg.MessagingServiceSid) != p.cfg.MessagingServiceSID {
			continue
		}
		o, err := object(msg)
		if err != nil {
			return nil, fmt.Errorf("twilio: list: %w", err)
		}
		if o.Created.Before(since) || !o.Created.Before(until) {
			continue
		}
		out = append(out, o)
	}
	return out, nil
}

// object describes a listed or fetched message: its Match is its recipient
// and body.
func object(msg openapi.ApiV2010Message) (effect.Object, error) {
	sid, to := deref(msg.Sid), deref(msg.To)
	created, err := time.Parse(time.RFC1123Z, deref(msg.DateCreated))
	if err != nil {
		return effect.Object{}, fmt.Errorf("message %s: date_created: %w", sid, err)
	}
	return effect.Object{Ref: sid, Kind: "message", Created: created.UTC(),
		Match: to + "\x00" + deref(msg.Body), Summary: "message to " + maskNumber(to) + ", " + deref(msg.Status)}, nil
}

// Held returns the messages Twilio holds for one intent whatever their time:
// message ref (when it exists), and those of the channel's sender to the
// payload's recipient with its body created since shortly before the intent
// (Twilio keeps no metadata: a message with the same recipient and body may
// be another intent's, so a match is held, never proof of absence). proven
// reports, when it finds none, that Twilio holds none: false when a listing
// was cut at its limit.
func (p *Provider) Held(ctx context.Context, ref string, payload json.RawMessage, meta map[string]string, created time.Time) (objects []effect.Object, proven bool, err error) {
	m, err := p.message(payload)
	if err != nil {
		return nil, false, &Error{Op: "held", Message: err.Error(), err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	if ref != "" {
		api, tr := p.api(ctx)
		msg, err := api.FetchMessage(ref, &openapi.FetchMessageParams{})
		if err != nil {
			if e := classify("held", m.To, err, tr); e.Status != http.StatusNotFound {
				return nil, false, e
			}
		} else {
			o, err := object(*msg)
			if err != nil {
				return nil, false, fmt.Errorf("twilio: held: %w", err)
			}
			objects = append(objects, o)
		}
	}
	matches, complete, err := p.sentSince(ctx, "held", m, created.Add(-lookupSkew))
	if err != nil {
		return nil, false, err
	}
	for _, o := range matches {
		if o.Ref != ref {
			objects = append(objects, o)
		}
	}
	return objects, complete, nil
}

// Match returns the recipient and body an SMS of payload carries, and whether
// List covers it: only a message from the channel's own sender is listed.
func (p *Provider) Match(payload json.RawMessage) (string, bool) {
	m, err := p.message(payload)
	if err != nil {
		return "", false
	}
	if m.From != p.cfg.From {
		return "", false
	}
	return m.To + "\x00" + m.Body, true
}
