package sandbox

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/effectd/effectd/providers/sandbox/internal/emu"
	"github.com/effectd/effectd/providers/sandbox/stripesandbox"
	"github.com/effectd/effectd/providers/sandbox/twiliosandbox"
)

// Options configure a Server.
type Options struct {
	// WebhookSecrets maps a receiver name (/hooks/{name}) to its Standard
	// Webhooks secret ("whsec_..."). A receiver without a secret accepts
	// unsigned calls.
	WebhookSecrets map[string]string
	// WebhookSecret is the secret of every receiver not in WebhookSecrets;
	// empty means those receivers accept unsigned calls.
	WebhookSecret string
	// StripeKeyWindow is how long Stripe idempotency keys are kept (default
	// stripesandbox.KeyWindow, 24h).
	StripeKeyWindow time.Duration
}

// Server is the emulator. Its Handler serves every provider on one mux.
type Server struct {
	opts   Options
	Ledger *Ledger
	Faults *Faults
	mux    *http.ServeMux
	stripe *stripesandbox.Emulator
	twilio *twiliosandbox.Emulator
	hooks  *hookReceiver
}

// New returns a Server with an empty ledger and no faults.
func New(opts Options) *Server {
	s := &Server{opts: opts, Ledger: emu.NewLedger(), Faults: &Faults{}, mux: http.NewServeMux()}
	s.stripe = stripesandbox.New(s.Ledger, s.Faults, opts.StripeKeyWindow)
	s.twilio = twiliosandbox.New(s.Ledger, s.Faults)
	s.hooks = newHookReceiver(s)
	s.mux.HandleFunc("GET /_sandbox/ledger", s.serveLedger)
	s.mux.HandleFunc("DELETE /_sandbox/ledger", s.resetLedger)
	s.mux.HandleFunc("GET /_sandbox/faults", s.serveFaults)
	s.mux.HandleFunc("PUT /_sandbox/faults/{kind}", s.setFault)
	s.mux.HandleFunc("DELETE /_sandbox/faults/{kind}", s.clearFault)
	s.stripe.Routes(s.mux)
	s.twilio.Routes(s.mux)
	s.hooks.routes(s.mux)
	return s
}

// Handler serves the emulator.
func (s *Server) Handler() http.Handler { return s.mux }

func (s *Server) serveLedger(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Ledger.Snapshot(r.URL.Query().Get("kind")))
}

func (s *Server) resetLedger(w http.ResponseWriter, r *http.Request) {
	s.Ledger.Reset()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) serveFaults(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Faults.All())
}

func (s *Server) setFault(w http.ResponseWriter, r *http.Request) {
	var f Fault
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "fault: " + err.Error()})
		return
	}
	for name, rate := range map[string]float64{"error_rate": f.ErrorRate, "hang_rate": f.HangRate, "drop_rate": f.DropRate} {
		if rate < 0 || rate > 1 {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": "fault: " + name + " must be between 0 and 1"})
			return
		}
	}
	s.Faults.Set(r.PathValue("kind"), f)
	writeJSON(w, http.StatusOK, f)
}

func (s *Server) clearFault(w http.ResponseWriter, r *http.Request) {
	s.Faults.Set(r.PathValue("kind"), Fault{})
	w.WriteHeader(http.StatusNoContent)
}

// writeJSON answers status with v encoded as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) { emu.JSON(status, v).Write(w) }
