package console

import (
	"bytes"
	"io"
	"net/http"
)

// inProcess is an http.RoundTripper that hands each request straight to the
// API's handler, without a socket.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	in := req.Clone(req.Context()) // as a server would see it: never a nil body
	if in.Body == nil {
		in.Body = http.NoBody
	}
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	t.h.ServeHTTP(rec, in)
	return &http.Response{StatusCode: rec.status, Header: rec.header, Body: io.NopCloser(&rec.body),
		ContentLength: int64(rec.body.Len()), Request: req, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
}

// recorder is the http.ResponseWriter of an in-process request.
type recorder struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if !r.wrote {
		r.status, r.wrote = status, true
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}
