package sandbox

import "net/http"

// hookReceiver emulates the webhook API. (placeholder: being written)
type hookReceiver struct{ s *Server }

func newHookReceiver(s *Server) *hookReceiver { return &hookReceiver{s: s} }

func (e *hookReceiver) routes(mux *http.ServeMux) {}
