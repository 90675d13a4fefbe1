package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/internal/query/eventdb"
	"github.com/effectd/effectd/internal/query/intentdb"
	"github.com/effectd/effectd/statemachine"
)

// ProviderEvent is one report from a provider about an object effectd created:
// a Twilio status callback or a Stripe event, already verified.
type ProviderEvent struct {
	Provider      string                // twilio | stripe
	EventID       string                // unique per provider and channel: Stripe's evt_…, for Twilio <MessageSid>:<MessageStatus>
	Channel       string                // the channel the event arrived for
	IntentID      int64                 // the intent id effectd stamped on the object (effect.MetaIntentID); 0 when the event carries none
	IntentEventID string                // the producer's event id effectd stamped on the object (effect.MetaEventID); "" when none
	ObjectRef     string                // SM…, re_…, pi_…, tr_…
	Type          string                // Stripe's event type; for Twilio the message status
	Status        string                // the object's status as the provider reports it
	Delivery      statemachine.Delivery // what Status means; Unknown moves nothing
	Reversal      bool                  // the provider undid an effect it had completed
	Detail        string                // the provider's status and error code, e.g. "undelivered 30003"
	Payload       json.RawMessage       // the event as received (a JSON object)
}

// Event outcomes, stored on effectd.provider_events.outcome and returned by RecordEvent.
const (
	EventApplied   = "applied"   // the intent's delivery moved
	EventSettled   = "settled"   // an in-doubt intent was settled SENT (and its delivery moved, if it said more)
	EventUnchanged = "unchanged" // about our intent, but it moves nothing (a late or repeated status)
	EventOtherRef  = "other_ref" // about another object than the intent's own (a duplicate send)
	EventOrphan    = "orphan"    // matches no intent
)

// EventResult is what recording one provider event did.
type EventResult struct {
	Duplicate bool                  // the event was stored before on this channel: nothing changed
	IntentID  int64                 // 0 for an orphan
	Outcome   string                // applied | settled | unchanged | other_ref | orphan
	From, To  statemachine.Delivery // the intent's delivery before and after
}

// RecordEvent stores ev once per channel in effectd.provider_events and
// applies it to its intent in the same transaction. The intent is the one of
// ev's channel with both IntentID and IntentEventID: an id alone is handed out
// again after a failover that lost its enqueue, and an event whose object
// carries no event id matches only the intent already holding ObjectRef
// (docs/guarantees.md, "Identities"). An intent still SENDING or IN_DOUBT is
// settled SENT with the event's reference (fenced; an attempt of kind
// callback), and its delivery moves forward as the statemachine's delivery
// table allows. An event repeated on its channel changes nothing; one that
// matches no intent of its channel is kept there as an orphan, and the same
// event arriving on its own channel is applied there.
func (d *Dispatcher) RecordEvent(ctx context.Context, ev ProviderEvent) (res EventResult, err error) {
	defer func() {
		if err != nil {
			err = opError(err, "RecordEvent(%s %s)", ev.Provider, ev.EventID)
		}
	}()
	if ev.Provider == "" || ev.EventID == "" || ev.Channel == "" || ev.Type == "" {
		return res, fmt.Errorf("%w: provider, event id, channel and type are required", ErrInvalid)
	}
	if len(ev.Payload) == 0 {
		ev.Payload = json.RawMessage(`{}`)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.WriteTimeout)
	defer cancel()
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return res, err
	}
	defer tx.Rollback(ctx)

	rowID, inserted, err := eventdb.RecordEvent(ctx, tx, eventdb.Event{Provider: ev.Provider, EventID: ev.EventID,
		Channel: ev.Channel, ObjectRef: ev.ObjectRef, Type: ev.Type, Status: ev.Status, Delivery: string(ev.Delivery),
		Detail: ev.Detail, Payload: ev.Payload})
	if err != nil {
		return res, err
	}
	if !inserted {
		return EventResult{Duplicate: true}, nil
	}
	res, sentAt, err := d.applyEvent(ctx, tx, ev)
	if err != nil {
		return res, err
	}
	if err := eventdb.SetEventOutcome(ctx, tx, rowID, res.IntentID, res.Outcome); err != nil {
		return res, err
	}
	if err := tx.Commit(ctx); err != nil {
		return res, err
	}
	d.countDelivery(ev.Channel, res, sentAt)
	if res.Outcome == EventOrphan {
		d.m.orphans.WithLabelValues(ev.Channel).Inc()
		d.log.Info("provider event matches no intent: kept as an orphan", "provider", ev.Provider, "event", ev.EventID, "channel", ev.Channel)
	}
	return res, nil
}

// applyEvent applies ev to its intent inside tx. sentAt is when the intent's
// delivery became known as accepted (zero if it never was).
func (d *Dispatcher) applyEvent(ctx context.Context, tx pgx.Tx, ev ProviderEvent) (res EventResult, sentAt time.Time, err error) {
	res.Outcome = EventOrphan
	in, err := d.eventIntent(ctx, tx, ev)
	if errors.Is(err, pgx.ErrNoRows) {
		return res, sentAt, nil
	}
	if err != nil {
		return res, sentAt, err
	}
	res.IntentID = in.ID
	res.From, res.To = statemachine.Delivery(in.Delivery), statemachine.Delivery(in.Delivery)
	if in.DeliveryAt != nil && res.From == statemachine.Accepted {
		sentAt = *in.DeliveryAt
	}
	res.Outcome = EventUnchanged
	if in.ProviderRef != "" && ev.ObjectRef != "" && in.ProviderRef != ev.ObjectRef {
		// Another object than the one the intent settled with: a duplicate
		// sent by a resend policy. It says nothing about this intent's delivery.
		res.Outcome = EventOtherRef
		return res, sentAt, nil
	}
	to, changed := statemachine.Report(res.From, ev.Delivery, ev.Reversal)
	if (in.Status == statemachine.Sending || in.Status == statemachine.InDoubt) && ev.ObjectRef != "" {
		if _, err := statemachine.Next(in.Status, statemachine.Callback); err != nil {
			return res, sentAt, err
		}
		// SENT says the provider has the effect: the row is settled with the
		// delivery the event reports, accepted at least, in one statement, so
		// that the notification of SENT tells it.
		var delivery, detail string
		switch {
		case changed:
			delivery, detail = string(to), ev.Detail
		case res.From == statemachine.Unknown:
			delivery = string(statemachine.Accepted)
		}
		settled, err := d.settleByEvent(ctx, tx, in, intentdb.SettleByEventParams{IntentID: res.IntentID, Key: in.Key, Attempts: in.Attempts,
			From: string(in.Status), ProviderRef: ev.ObjectRef, Outcome: "settled by a " + ev.Provider + " event: " + ev.Type,
			Delivery: delivery, Detail: detail})
		if err != nil {
			return res, sentAt, err
		}
		if settled {
			res.Outcome = EventSettled
			if delivery != "" {
				res.To = statemachine.Delivery(delivery)
			}
			d.intentLog(in.Traceparent).Info("in-doubt intent settled by a provider event", "intent", res.IntentID, "channel", ev.Channel, "from", in.Status, "event", ev.EventID)
			return res, sentAt, nil
		}
	}
	if !changed {
		return res, sentAt, nil
	}
	moved, err := d.setDelivery(ctx, tx, in, intentdb.DeliveryChange{IntentID: res.IntentID, Key: in.Key, From: string(res.From), To: string(to), Detail: ev.Detail})
	if err != nil {
		return res, sentAt, err
	}
	if moved {
		res.To, res.Outcome = to, EventApplied
	}
	return res, sentAt, nil
}

// eventIntent locks the intent ev is about (storage.Engine.EventIntent),
// with its idempotency key, which the writes that follow fence on.
func (d *Dispatcher) eventIntent(ctx context.Context, tx pgx.Tx, ev ProviderEvent) (intentdb.EventTarget, error) {
	o := intentdb.EventObject{IntentID: ev.IntentID, EventID: ev.IntentEventID, Ref: ev.ObjectRef}
	return d.store.EventIntent(ctx, tx, ev.Channel, o)
}

// settleByEvent applies s to intent in (storage.Engine.SettleByEvent).
func (d *Dispatcher) settleByEvent(ctx context.Context, tx pgx.Tx, in intentdb.EventTarget, s intentdb.SettleByEventParams) (bool, error) {
	return d.store.SettleByEvent(ctx, tx, in, s)
}

// setDelivery applies c to intent in (storage.Engine.SetDelivery).
func (d *Dispatcher) setDelivery(ctx context.Context, tx pgx.Tx, in intentdb.EventTarget, c intentdb.DeliveryChange) (bool, error) {
	return d.store.SetDelivery(ctx, tx, in, c)
}

// countDelivery counts a delivery that moved, and times SENT → final.
func (d *Dispatcher) countDelivery(channel string, res EventResult, sentAt time.Time) {
	if res.To == res.From {
		return
	}
	d.m.deliveries.WithLabelValues(channel, string(res.To)).Inc()
	if res.To.Final() && !res.From.Final() {
		secs := 0.0
		if !sentAt.IsZero() {
			secs = max(time.Since(sentAt).Seconds(), 0)
		}
		d.m.deliveryTime.WithLabelValues(channel).Observe(secs)
	}
}

// DetailOf joins a provider status and error code as delivery_detail shows
// them: "undelivered 30003", or the status alone.
func DetailOf(status string, code ...string) string {
	parts := []string{status}
	for _, c := range code {
		if c != "" {
			parts = append(parts, c)
		}
	}
	return strings.Join(parts, " ")
}

// DeliveryNote returns what a provider's delivery detail adds to the words
// a page already shows. The detail is the provider's status, then its code
// ("undelivered 30003"): a status among shown is not repeated. It returns
// "provider code 30003", "provider status failed, code 30008", or "".
func DeliveryNote(detail string, shown ...string) string {
	status, code, _ := strings.Cut(strings.TrimSpace(detail), " ")
	var parts []string
	if status != "" && !slices.Contains(shown, status) {
		parts = append(parts, "status "+status)
	}
	if code = strings.TrimSpace(code); code != "" {
		parts = append(parts, "code "+code)
	}
	if len(parts) == 0 {
		return ""
	}
	return "provider " + strings.Join(parts, ", ")
}
