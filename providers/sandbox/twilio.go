package sandbox

import "net/http"

// twilioEmu emulates the twilio API. (placeholder: being written)
type twilioEmu struct{ s *Server }

func newTwilioEmu(s *Server) *twilioEmu { return &twilioEmu{s: s} }

func (e *twilioEmu) routes(mux *http.ServeMux) {}
