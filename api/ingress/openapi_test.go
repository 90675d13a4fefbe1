package ingress_test

import (
	"net/http"
	"slices"
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
	documented := openapitest.Load(t, "openapi.yaml").Operations()
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
	for _, r := range served {
		if !slices.Contains(documented, r) {
			t.Errorf("%s is served but not in openapi.yaml", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(served, r) {
			t.Errorf("%s is in openapi.yaml but not served", r)
		}
	}
	if len(served) == 0 {
		t.Error("no route served")
	}
}
