package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/statemachine"
)

// channelState returns what a channel row holds now and how many audit rows exist.
func (e env) channelState(t *testing.T, name string) (override string, paused bool, audits int) {
	t.Helper()
	err := e.pool.QueryRow(context.Background(), `
SELECT policy_override::text, paused, (SELECT count(*) FROM effectd.audit WHERE channel = $1)
FROM effectd.channels WHERE name = $1`, name).Scan(&override, &paused, &audits)
	if err != nil {
		t.Fatal(err)
	}
	return override, paused, audits
}

func TestGetChannel(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.insertIntent(t, "sms", "a", statemachine.Pending)
	e.insertIntent(t, "sms", "b", statemachine.InDoubt)
	status, body := e.do(t, "GET", "/v1/channels/sms", readToken, "")
	want(t, status, body, http.StatusOK)
	golden(t, "channel_sms.json", body)

	status, body = e.do(t, "GET", "/v1/channels", readToken, "")
	want(t, status, body, http.StatusOK)
	var list struct{ Channels []effectdtype.Channel }
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range list.Channels {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "hook,refund,sms" {
		t.Errorf("channels %v, want hook, refund, sms", names)
	}
	if p := list.Channels[0].Policy; p.InDoubt != "resend" || p.MaxAttempts != 8 {
		t.Errorf("hook policy %+v, want the webhook defaults", p)
	}
	if p := list.Channels[1].Policy; p.LookupFallback != "manual" {
		t.Errorf("refund lookup_fallback %q, want manual from its YAML policy", p.LookupFallback)
	}

	status, body = e.do(t, "GET", "/v1/channels/nope", readToken, "")
	want(t, status, body, http.StatusNotFound, "nope")
}

func TestPatchPolicy(t *testing.T) {
	t.Parallel()
	e := setup(t)

	status, body := e.do(t, "PATCH", "/v1/channels/sms/policy", adminToken, `{"max_attempts": 3, "backoff": {"base": "2s"}}`)
	want(t, status, body, http.StatusOK, `"max_attempts": 3`, `"base": "2s"`, `"max": "10m0s"`, `"lease": "20s"`)
	override, _, audits := e.channelState(t, "sms")
	if override != `{"backoff": {"base": "2s"}, "max_attempts": 3}` || audits != 1 {
		t.Errorf("override %s with %d audit rows, want max_attempts and backoff.base only, 1 audit row", override, audits)
	}
	var before, after string
	if err := e.pool.QueryRow(context.Background(), `
SELECT before->'policy'->>'max_attempts', after->'policy'->>'max_attempts' FROM effectd.audit
WHERE channel = 'sms' AND action = 'channel.policy' AND actor = 'admin'`).Scan(&before, &after); err != nil || before != "5" || after != "3" {
		t.Errorf("audit max_attempts %s -> %s (%v), want 5 -> 3", before, after, err)
	}

	for _, tt := range []struct {
		body    string
		status  int
		mention string
	}{
		{`{"lease": "-1s"}`, http.StatusUnprocessableEntity, "lease"},
		{`{"bogus": 1}`, http.StatusBadRequest, "bogus"},
		{`{"max_attempts": "x"}`, http.StatusUnprocessableEntity, "max_attempts"},
		{`{"in_doubt": "pray"}`, http.StatusUnprocessableEntity, "in_doubt"},
		{`{"backoff": {"base": "1h"}}`, http.StatusUnprocessableEntity, "backoff.max"},
		{`{"lease": 30}`, http.StatusUnprocessableEntity, "lease"},
		{`{}`, http.StatusUnprocessableEntity, "no policy field"},
		{`[]`, http.StatusBadRequest, "object"},
		{`{"lease": "1m"} x`, http.StatusBadRequest, "trailing"},
	} {
		status, body := e.do(t, "PATCH", "/v1/channels/sms/policy", adminToken, tt.body)
		want(t, status, body, tt.status, tt.mention)
		if o, _, n := e.channelState(t, "sms"); o != override || n != 1 {
			t.Errorf("%s changed the channel: override %s, %d audit rows", tt.body, o, n)
		}
	}

	// null drops an override: max_attempts is the YAML's 5 again.
	status, body = e.do(t, "PATCH", "/v1/channels/sms/policy", adminToken, `{"max_attempts": null}`)
	want(t, status, body, http.StatusOK, `"max_attempts": 5`)
	if o, _, n := e.channelState(t, "sms"); o != `{"backoff": {"base": "2s"}}` || n != 2 {
		t.Errorf("after null: override %s, %d audit rows", o, n)
	}

	// backoff.max was never pinned: a new YAML max shows through the override of base.
	if _, err := e.pool.Exec(context.Background(), `UPDATE effectd.channels SET policy = policy || '{"backoff": {"base": "1s", "max": "3m"}}' WHERE name = 'sms'`); err != nil {
		t.Fatal(err)
	}
	status, body = e.do(t, "GET", "/v1/channels/sms", readToken, "")
	want(t, status, body, http.StatusOK, `"base": "2s"`, `"max": "3m0s"`)
	// Nested keys merge one by one, and a nested null drops only its key.
	status, body = e.do(t, "PATCH", "/v1/channels/sms/policy", adminToken, `{"backoff": {"max": "1h"}}`)
	want(t, status, body, http.StatusOK, `"base": "2s"`, `"max": "1h0m0s"`)
	status, body = e.do(t, "PATCH", "/v1/channels/sms/policy", adminToken, `{"backoff": {"base": null}}`)
	want(t, status, body, http.StatusOK, `"base": "1s"`, `"max": "1h0m0s"`)
	if o, _, _ := e.channelState(t, "sms"); o != `{"backoff": {"max": "1h0m0s"}}` {
		t.Errorf("after a nested null: override %s", o)
	}
	status, body = e.do(t, "PATCH", "/v1/channels/sms/policy", adminToken, `{"backoff": {"max": null}}`)
	want(t, status, body, http.StatusOK, `"max": "3m0s"`, `"policy_override": {}`)
	status, body = e.do(t, "PATCH", "/v1/channels/sms/policy", adminToken, `{"backoff": {"maximum": "1h"}}`)
	want(t, status, body, http.StatusUnprocessableEntity, "maximum")

	status, body = e.do(t, "PATCH", "/v1/channels/nope/policy", adminToken, `{"max_attempts": 2}`)
	want(t, status, body, http.StatusNotFound, "nope")
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	e := setup(t)
	status, body := e.do(t, "POST", "/v1/channels/refund/pause", adminToken, "")
	want(t, status, body, http.StatusOK, `"paused": true`)
	if _, paused, audits := e.channelState(t, "refund"); !paused || audits != 1 {
		t.Errorf("after pause: paused=%v with %d audit rows", paused, audits)
	}
	status, body = e.do(t, "POST", "/v1/channels/refund/resume", adminToken, "")
	want(t, status, body, http.StatusOK, `"paused": false`)
	if _, paused, audits := e.channelState(t, "refund"); paused || audits != 2 {
		t.Errorf("after resume: paused=%v with %d audit rows", paused, audits)
	}
	var actions string
	if err := e.pool.QueryRow(context.Background(), `
SELECT string_agg(action || ':' || (before->>'paused') || '->' || (after->>'paused'), ',' ORDER BY id) FROM effectd.audit`).Scan(&actions); err != nil {
		t.Fatal(err)
	}
	if actions != "channel.pause:false->true,channel.resume:true->false" {
		t.Errorf("audit %s", actions)
	}
	status, body = e.do(t, "POST", "/v1/channels/nope/pause", adminToken, "")
	want(t, status, body, http.StatusNotFound)
}
