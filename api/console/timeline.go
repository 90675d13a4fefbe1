package console

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/effectd/effectd/api/client"
	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/statemachine"
)

// timelineItem is one thing that happened to an intent.
type timelineItem struct {
	At      time.Time
	Kind    string // send | lookup | callback | operator | provider event | audit
	Title   string
	Detail  string
	Ref     string
	Actor   string
	Reason  string
	Failure bool
}

// timeline merges attempts, lookups, provider events and audit entries, oldest first.
func timeline(d client.IntentDetail, events []client.ProviderEvent) []timelineItem {
	var out []timelineItem
	for _, a := range d.Attempts {
		it := timelineItem{At: a.StartedAt, Kind: a.Kind, Title: fmt.Sprintf("%s #%d: %s", a.Kind, a.Attempt, a.Outcome),
			Detail: deref(a.Error), Ref: deref(a.ProviderRef), Failure: a.Error != nil && *a.Error != ""}
		if a.Kind == "operator" {
			continue // the audit entry of the same change says who and why
		}
		out = append(out, it)
	}
	for _, e := range events {
		title := e.Provider + " " + e.Type
		if d := deref(e.Delivery); d != "" && d != e.Type {
			title += ": " + d
		}
		detail := "outcome " + e.Outcome
		if note := dispatcher.DeliveryNote(deref(e.Detail), e.Type, deref(e.Delivery)); note != "" {
			detail = note + " · " + detail
		}
		out = append(out, timelineItem{At: e.ReceivedAt, Kind: "provider event", Title: title,
			Detail: detail, Ref: deref(e.ObjectRef), Failure: statemachine.Delivery(deref(e.Delivery)) == statemachine.Undelivered})
	}
	for _, a := range d.Audit {
		var before, after struct {
			Status   string `json:"status"`
			Reason   string `json:"reason"`
			Snapshot string `json:"snapshot"`
		}
		json.Unmarshal(a.Before, &before)
		json.Unmarshal(a.After, &after)
		reason := after.Reason
		if a.Reason != nil {
			reason = *a.Reason
		}
		title := a.Action
		if before.Status != "" && after.Status != "" {
			title += ": " + before.Status + " → " + after.Status
		}
		detail := ""
		if after.Snapshot != "" {
			detail = "bulk snapshot " + after.Snapshot
		}
		out = append(out, timelineItem{At: a.At, Kind: "audit", Title: title, Actor: a.Actor, Reason: reason, Detail: detail})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// dashboardLink returns the provider's own page for a reference, or "".
func dashboardLink(provider, ref string) string {
	switch {
	case ref == "":
		return ""
	case provider == "stripe" && strings.HasPrefix(ref, "re_"):
		return "https://dashboard.stripe.com/refunds/" + ref
	case provider == "stripe" && strings.HasPrefix(ref, "pi_"):
		return "https://dashboard.stripe.com/payments/" + ref
	case provider == "stripe" && strings.HasPrefix(ref, "tr_"):
		return "https://dashboard.stripe.com/connect/transfers/" + ref
	case provider == "twilio" && (strings.HasPrefix(ref, "SM") || strings.HasPrefix(ref, "MM")):
		return "https://console.twilio.com/us1/monitor/logs/sms/" + ref
	}
	return ""
}
