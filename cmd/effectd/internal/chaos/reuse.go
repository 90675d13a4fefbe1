package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/api/client"
	"github.com/effectd/effectd/providers/sandbox"
	"github.com/effectd/effectd/providers/sandbox/twiliosandbox"
)

// An id handed to another intent (Config.Actors, with the ingress): after an
// asynchronous failover loses an intent, the promoted primary's sequence may
// give its id to a new intent, and the lost intent's message still has
// callbacks on their way. The checker builds that state directly after the
// drain, while the instances serve: it takes a SENT intent X of a Twilio
// channel whose message the sandbox reported on, deletes X and the provider
// events recorded for it (the failover lost them), inserts in X's place an
// intent Y of a new event with X's id (OVERRIDING SYSTEM VALUE), IN_DOUBT
// with no reference, on the same channel, and replays X's message's
// `delivered` callback to the ingress exactly as the sandbox sent it (its
// URL, with what effectd appended, signed as Twilio signs). Y must come out
// as it went in: no intent is changed by a message about another.
//
// Then an operator's bulk action across a second reuse (reuseBulk): a bulk
// resolve as skip is frozen over Y, Y is lost in turn and its id given to
// an intent Z of another event in Y's state and attempts, and the snapshot
// is applied through the API. Z must come out as it went in and the apply
// must count the row skipped. Then X and its events are put back as they
// were.

// reuseChannel is the channel of the scenario: an in-doubt policy of
// manual, so that nothing but the callback could settle Y.
const reuseChannel = "sms-manual"

// reuseID runs the scenario once and returns its violations.
func (h *harness) reuseID(ctx context.Context, ledger sandbox.Snapshot) []Violation {
	op := Op{At: time.Now(), Actor: "provider", Action: "callback of a lost intent's message after its id was reused", Channel: reuseChannel, Result: "ok"}
	defer func() { h.hist.add(op) }()
	fail := func(format string, args ...any) []Violation {
		op.Result, op.Detail = "unknown", fmt.Sprintf(format, args...)
		h.note("id reuse: %s", op.Detail)
		return nil
	}
	x, callbackURL, to, err := h.reuseCandidate(ctx, ledger)
	if err != nil {
		return fail("%v", err)
	}
	newEvent := fmt.Sprintf("reused-%d", x.ID)
	op.Event, op.IntentID = newEvent, x.ID

	if err := h.handOverID(ctx, x.ID, newEvent, to); err != nil {
		return fail("handing intent %d's id to %s: %v", x.ID, newEvent, err)
	}
	defer h.restoreReused(context.WithoutCancel(ctx), x.ID, x.Ref)

	answer, err := replayDelivered(ctx, callbackURL, x.Ref, to)
	if err != nil {
		return fail("replaying %s's callback: %v", x.Ref, err)
	}
	var status, ref, delivery string
	if err := h.pool.QueryRow(ctx, `SELECT status, coalesce(provider_ref, ''), coalesce(delivery, '') FROM effectd.intents WHERE id = $1`, x.ID).
		Scan(&status, &ref, &delivery); err != nil {
		return fail("reading %s: %v", newEvent, err)
	}
	op.Detail = fmt.Sprintf("intent %d's message %s replayed (answered %d) onto %s: %s ref=%q delivery=%q", x.ID, x.Ref, answer, newEvent, status, ref, delivery)
	h.note("id reuse: %s", op.Detail)
	var vs []Violation
	if status != "IN_DOUBT" || ref != "" || delivery != "" {
		vs = append(vs, Violation{Rule: "a callback about a lost intent's message changed another intent given its id", Channel: reuseChannel,
			Keys: []string{fmt.Sprintf("%s (intent %d, %s ref=%s delivery=%s, by %s)", newEvent, x.ID, status, ref, delivery, x.Ref)}})
	}
	return append(vs, h.reuseBulk(ctx, x.ID, newEvent)...)
}

// reuseBulk freezes a bulk resolve as skip over intent id of event frozen
// (IN_DOUBT, one attempt: handOverID made it), hands id to an intent of a
// new event in the same state, applies the snapshot through the API and
// returns a violation when the apply changed that intent or did not count
// its row skipped.
func (h *harness) reuseBulk(ctx context.Context, id int64, frozen string) []Violation {
	newEvent := frozen + "-again"
	op := Op{At: time.Now(), Actor: "operator", Action: "bulk resolve skip frozen before its intent's id was reused", Channel: reuseChannel,
		Event: newEvent, IntentID: id, Result: "ok"}
	defer func() { h.hist.add(op) }()
	fail := func(format string, args ...any) []Violation {
		op.Result, op.Detail = "unknown", fmt.Sprintf(format, args...)
		h.note("id reuse: %s", op.Detail)
		return nil
	}
	addr, _ := h.instances[0].addr.Load().(string)
	c := &client.Client{BaseURL: addr, HTTP: newHTTPClient()}
	snap, err := c.Bulk(ctx, client.BulkRequest{Action: "resolve", As: "skip", Reason: "checked at the provider",
		Filter: client.BulkFilter{Status: "IN_DOUBT", Channel: reuseChannel, EventIDPrefix: frozen}})
	if err != nil || snap.Matched != 1 {
		return fail("freezing a bulk over %s: matched %d, %v", frozen, snap.Matched, err)
	}
	// the second failover: the intent frozen is lost, its id given to another
	if _, err := h.pool.Exec(ctx, `UPDATE effectd.intents SET event_id = $2, idempotency_key = channel || ':' || $2 WHERE id = $1`,
		id, newEvent); err != nil {
		return fail("handing intent %d's id to %s: %v", id, newEvent, err)
	}
	res, err := c.ApplyBulk(ctx, snap.Snapshot)
	if err != nil {
		return fail("applying snapshot %s: %v", snap.Snapshot, err)
	}
	var status string
	var attempts int
	if err := h.pool.QueryRow(ctx, `SELECT status, attempts FROM effectd.intents WHERE id = $1`, id).Scan(&status, &attempts); err != nil {
		return fail("reading %s: %v", newEvent, err)
	}
	op.Detail = fmt.Sprintf("snapshot %s frozen over %s (intent %d), applied after the id went to %s: %+v; %s is %s, %d attempts",
		snap.Snapshot, frozen, id, newEvent, res, newEvent, status, attempts)
	h.note("id reuse: %s", op.Detail)
	if status == "IN_DOUBT" && attempts == 1 && res.Applied == 0 && res.Skipped == 1 {
		return nil
	}
	return []Violation{{Rule: "a bulk action frozen over a lost intent changed another intent given its id", Channel: reuseChannel,
		Keys: []string{fmt.Sprintf("%s (intent %d, %s, %d attempts; apply %+v)", newEvent, id, status, attempts, res)}}}
}

// sentMessage is a SENT intent of reuseChannel and its message's SID.
type sentMessage struct {
	ID  int64
	Ref string
}

// reuseCandidate picks, by the seed, a SENT intent of reuseChannel whose
// message the sandbox reported on, and returns it with its message's
// callback URL and recipient.
func (h *harness) reuseCandidate(ctx context.Context, ledger sandbox.Snapshot) (x sentMessage, callbackURL, to string, err error) {
	// the messages the sandbox reported on, by SID: their callback URL
	reported := map[string]string{}
	for _, cb := range ledger.Callbacks {
		if cb.Kind == "twilio" && cb.Answer == http.StatusOK && strings.Contains(cb.URL, "/ingress/twilio/"+reuseChannel) {
			reported[cb.Ref] = cb.URL
		}
	}
	var candidates []sentMessage
	rows, err := h.pool.Query(ctx, `SELECT id, provider_ref FROM effectd.intents WHERE channel = $1 AND status = 'SENT' AND provider_ref IS NOT NULL ORDER BY id`, reuseChannel)
	if err == nil {
		candidates, err = pgx.CollectRows(rows, pgx.RowToStructByPos[sentMessage])
	}
	if err != nil {
		return sentMessage{}, "", "", fmt.Errorf("listing SENT intents: %w", err)
	}
	candidates = slices.DeleteFunc(candidates, func(c sentMessage) bool {
		return reported[c.Ref] == ""
	})
	if len(candidates) == 0 {
		return sentMessage{}, "", "", fmt.Errorf("no SENT intent of %s with a callback", reuseChannel)
	}
	x = candidates[rand.New(rand.NewPCG(h.cfg.Seed, 8)).IntN(len(candidates))]
	for _, e := range ledger.Effects {
		if e.Kind == "twilio" && e.Ref == x.Ref {
			var b struct {
				To string `json:"to"`
			}
			json.Unmarshal(e.Body, &b)
			to = b.To
		}
	}
	return x, reported[x.Ref], to, nil
}

// handOverID replaces intent id and its provider events by a new intent of
// newEvent (to to) with the same id, IN_DOUBT without a reference, as a
// failover that lost the intent and handed its id out again leaves it; X's
// row and events are kept aside in public.chaos_reused* for restoreReused.
func (h *harness) handOverID(ctx context.Context, id int64, newEvent, to string) error {
	return pgx.BeginFunc(ctx, h.pool, func(tx pgx.Tx) error {
		// CREATE TABLE … AS takes no parameters: the id is an integer. Y is a
		// copy of X's row (its bucket too, in the distributed mode) made anew.
		for _, sql := range []string{
			`CREATE TABLE public.chaos_reused AS SELECT * FROM effectd.intents WHERE id = %d`,
			`CREATE TABLE public.chaos_reused_events AS SELECT * FROM effectd.provider_events WHERE intent_id = %d`,
			`CREATE TABLE public.chaos_reuser AS SELECT * FROM effectd.intents WHERE id = %d`,
		} {
			if _, err := tx.Exec(ctx, fmt.Sprintf(sql, id)); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE public.chaos_reuser SET event_id = $1, idempotency_key = channel || ':' || $1,
			payload = jsonb_build_object('to', $2::text, 'body', channel || ' ' || $1), status = 'IN_DOUBT', attempts = 1,
			provider_ref = NULL, last_error = NULL, lease_expires_at = NULL, claimed_at = NULL,
			delivery = NULL, delivery_detail = NULL, delivery_at = NULL,
			next_attempt_at = now(), created_at = now(), updated_at = now()`, newEvent, smsNumber(900000+int(id))); err != nil {
			return err
		}
		for _, sql := range []string{
			`DELETE FROM effectd.provider_events WHERE intent_id = %d`,
			`DELETE FROM effectd.intents WHERE id = %d`,
			`INSERT INTO effectd.intents OVERRIDING SYSTEM VALUE SELECT * FROM public.chaos_reuser WHERE id = %d`,
			`DROP TABLE public.chaos_reuser -- %d`,
		} {
			if _, err := tx.Exec(ctx, fmt.Sprintf(sql, id)); err != nil {
				return err
			}
		}
		return nil
	})
}

// replayDelivered posts the `delivered` status callback of message sid (to
// to) to callbackURL, signed as Twilio signs it, and returns the answer.
func replayDelivered(ctx context.Context, callbackURL, sid, to string) (int, error) {
	form := url.Values{"MessageSid": {sid}, "SmsSid": {sid}, "AccountSid": {twilioSID}, "To": {to},
		"MessageStatus": {"delivered"}, "SmsStatus": {"delivered"}, "ApiVersion": {"2010-04-01"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, callbackURL, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Twilio-Signature", twiliosandbox.Signature("chaos", callbackURL, form))
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// restoreReused puts intent id and its provider events back as they were
// before reuseID, and removes what the replay recorded.
func (h *harness) restoreReused(ctx context.Context, id int64, sid string) {
	err := pgx.BeginFunc(ctx, h.pool, func(tx pgx.Tx) error {
		for _, sql := range []string{
			`DELETE FROM effectd.provider_events WHERE intent_id = $1 OR event_id LIKE $2`,
			`DELETE FROM effectd.intents WHERE id = $1`,
			`INSERT INTO effectd.intents OVERRIDING SYSTEM VALUE SELECT * FROM public.chaos_reused`,
			`INSERT INTO effectd.provider_events OVERRIDING SYSTEM VALUE SELECT * FROM public.chaos_reused_events`,
			`DROP TABLE public.chaos_reused, public.chaos_reused_events`,
		} {
			args := []any{}
			if strings.Contains(sql, "$2") {
				args = []any{id, sid + ":%"}
			} else if strings.Contains(sql, "$1") {
				args = []any{id}
			}
			if _, err := tx.Exec(ctx, sql, args...); err != nil {
				return fmt.Errorf("%.40s: %w", sql, err)
			}
		}
		return nil
	})
	if err != nil {
		h.note("id reuse: putting intent %d back: %v", id, err)
	}
}
