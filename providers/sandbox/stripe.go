package sandbox

import "net/http"

// stripeEmu emulates the stripe API. (placeholder: being written)
type stripeEmu struct{ s *Server }

func newStripeEmu(s *Server) *stripeEmu { return &stripeEmu{s: s} }

func (e *stripeEmu) routes(mux *http.ServeMux) {}
