package openapitest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// Spec is a loaded, valid OpenAPI description.
type Spec struct {
	Doc    *openapi3.T
	router routers.Router
}

// Load reads the description at path and fails t unless it parses and passes
// the OpenAPI 3 validator (unknown keys, bad references, examples and
// defaults that do not match their schema).
func Load(t testing.TB, path string) *Spec {
	t.Helper()
	s, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Read is Load for a caller without a testing.TB: it returns what Load
// would fail on.
func Read(path string) (*Spec, error) {
	doc, err := openapi3.NewLoader().LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("%s is not a valid OpenAPI description: %w", path, err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("%s: routes: %w", path, err)
	}
	return &Spec{Doc: doc, router: router}, nil
}

// Operations returns every documented operation as "METHOD /path", sorted.
func (s *Spec) Operations() []string {
	var out []string
	for path, item := range s.Doc.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, method+" "+path)
		}
	}
	slices.Sort(out)
	return out
}

// MatchRoutes fails t for each route served ("METHOD /path") that the
// description lacks, for each documented operation not served, and when
// nothing is served.
func (s *Spec) MatchRoutes(t testing.TB, served []string) {
	t.Helper()
	documented := s.Operations()
	for _, r := range served {
		if !slices.Contains(documented, r) {
			t.Errorf("%s is served but not in the description", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(served, r) {
			t.Errorf("%s is in the description but not served", r)
		}
	}
	if len(served) == 0 {
		t.Error("no route served")
	}
}

// CheckResponse validates an answer to req against the description: its
// status must be documented for the operation and its body must match that
// status's schema. It returns the operation as Operations names it.
func (s *Spec) CheckResponse(req *http.Request, status int, header http.Header, body []byte) (op string, err error) {
	route, params, err := s.router.FindRoute(req)
	if err != nil {
		return "", fmt.Errorf("%s %s: not in the description: %w", req.Method, req.URL.Path, err)
	}
	op = route.Method + " " + route.Path
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(req.Context(), in); err != nil {
		return op, fmt.Errorf("%s %s: %d %s: %w", req.Method, req.URL.RequestURI(), status, shorten(body), err)
	}
	return op, nil
}

// shorten keeps a body short enough to read in a failure message.
func shorten(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 600 {
		return strings.ToValidUTF8(string(b[:600]), "") + "…"
	}
	return string(b)
}
