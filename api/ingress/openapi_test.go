package ingress_test

import (
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/effectd/effectd/api/ingress"
	"github.com/effectd/effectd/internal/openapitest"
)

// TestOpenAPIValid loads openapi.yaml, the description of the ingress
// routes, with a real OpenAPI 3 parser and validator.
func TestOpenAPIValid(t *testing.T) {
	t.Parallel()
	openapitest.Load(t, "openapi.yaml")
}

// TestOpenAPIMatchesRoutes checks that openapi.yaml documents exactly the
// routes that the ingress handler serves.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	spec := openapitest.Load(t, "openapi.yaml")
	h, err := ingress.NewHandler(ingress.Config{Recorder: &recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	routes, ok := h.(chi.Routes)
	if !ok {
		t.Fatalf("ingress.NewHandler returned a %T, not a chi router: its routes cannot be listed", h)
	}
	var served []string
	err = chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		served = append(served, method+" "+route)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	spec.MatchRoutes(t, served)
}
