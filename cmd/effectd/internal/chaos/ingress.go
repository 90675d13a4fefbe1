package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/query/harnessdb"
	"github.com/effectd/effectd/providers/sandbox"
)

// Provider events and callbacks (Config.Actors): every instance serves the
// ingress (serve --ingress-addr), and the run's one public ingress address is
// a proxy of the harness that passes each request to an instance's ingress
// that listens, the next one when it cannot be reached (a killed instance:
// the request never left). Each Twilio channel's status_callback names the
// proxy, so the sandbox's Twilio reports queued, sent and delivered for each
// message; the sandbox's Stripe sends its events (refund.created,
// refund.updated, …) to the refund channel's endpoint on the proxy, signed
// with stripeWebhookSecret.

// stripeWebhookSecret signs the sandbox's Stripe events: it opens nothing but
// the in-process sandbox.
const stripeWebhookSecret = "whsec_chaos_stripe_events"

// ingressProxy passes requests to the instances' ingresses.
type ingressProxy struct {
	instances []*instance
	next      atomic.Uint64
	client    *http.Client
	srv       *http.Server
	url       string // http://host:port
}

// startIngressProxy listens on a loopback port; the instances are set later.
func (h *harness) startIngressProxy() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("chaos: ingress proxy: %w", err)
	}
	px := &ingressProxy{url: "http://" + ln.Addr().String(), client: &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext, DisableKeepAlives: true}}}
	px.srv = &http.Server{Handler: px, ReadHeaderTimeout: 10 * time.Second}
	go px.srv.Serve(ln)
	h.ingress = px
	return nil
}

// ServeHTTP passes r to an instance's ingress, trying each in turn for up to
// 5 s while none can be reached; then it answers 503, as a load balancer
// with no backend would.
func (px *ingressProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		p := px.instances[px.next.Add(1)%uint64(len(px.instances))]
		addr, _ := p.ingress.Load().(string)
		if addr == "" {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, addr+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := px.client.Do(req)
		var dial *net.OpError
		if errors.As(err, &dial) && dial.Op == "dial" {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
		resp.Body.Close()
		return
	}
	http.Error(w, "no instance's ingress listens", http.StatusServiceUnavailable)
}

// close stops the proxy.
func (px *ingressProxy) close() {
	if px != nil {
		px.srv.Close()
	}
}

// registerStripeEvents has the sandbox's Stripe send its events to the
// refund channels' ingress endpoint.
func (h *harness) registerStripeEvents(ctx context.Context, sandboxURL string) error {
	for _, c := range h.cfg.Channels {
		if c.Provider != "stripe" {
			continue
		}
		body := fmt.Sprintf(`{"url":%q,"secret":%q}`, h.ingress.url+"/ingress/stripe/"+c.Name, stripeWebhookSecret)
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, sandboxURL+"/_sandbox/stripe/webhook", strings.NewReader(body))
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("chaos: registering the Stripe events' endpoint: %w", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("chaos: registering the Stripe events' endpoint: %s", resp.Status)
		}
		return nil // the sandbox has one endpoint
	}
	return nil
}

// judgeEvents reads every provider event the ingress recorded, counts them
// by provider and outcome (for the report), and flags each one applied to an
// intent whose object is not that intent's effect in the ledger: a message
// about another changed it.
func judgeEvents(ctx context.Context, pool *pgxpool.Pool, intents []harnessdb.IntentTally, ledger sandbox.Snapshot) (string, []Violation, error) {
	rows, err := pool.Query(ctx, `SELECT provider, split_part(outcome, ':', 1), intent_id, coalesce(object_ref, ''), event_id FROM effectd.provider_events`)
	if err != nil {
		return "", nil, fmt.Errorf("chaos: reading provider events: %w", err)
	}
	events, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		Provider, Outcome string
		IntentID          *int64
		Ref, ID           string
	}])
	if err != nil {
		return "", nil, fmt.Errorf("chaos: reading provider events: %w", err)
	}
	byID := map[int64]target{}
	for _, in := range intents {
		byID[in.ID] = target{in.Channel, in.EventID}
	}
	owner := map[string]target{} // a provider object's ref → the target it is the effect of
	for _, e := range ledger.Effects {
		if t, ok := effectTarget(e); ok && e.Ref != "" {
			owner[e.Ref] = t
		}
	}
	n := map[string]int{}
	checked := 0 // events on an intent whose object the ledger attributes
	bad := map[[2]string][]string{}
	for _, e := range events {
		n[e.Provider+" "+e.Outcome]++
		if e.IntentID == nil || e.Ref == "" {
			continue
		}
		t, ok := byID[*e.IntentID]
		o, known := owner[e.Ref]
		if !ok || !known || e.Outcome == "orphan" || strings.HasPrefix(e.Outcome, "ignored") {
			continue
		}
		checked++
		if o == t {
			continue
		}
		rule := [2]string{"provider event about " + o.channel + "/" + o.event + "'s object recorded on another intent", t.channel}
		bad[rule] = append(bad[rule], fmt.Sprintf("%s (%s %s, intent %d)", t.event, e.ID, e.Outcome, *e.IntentID))
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(n)) {
		fmt.Fprintf(&b, "  ingress %s ×%d\n", k, n[k])
	}
	fmt.Fprintf(&b, "  ingress events on an intent, checked to be about its own effect ×%d\n", checked)
	return b.String(), sortedViolations(bad), nil
}
