package api

import (
	"log/slog"
	"testing"

	"github.com/effectd/effectd/internal/openapitest"
	"github.com/effectd/effectd/internal/pgtest"
)

// TestOpenAPIValid loads openapi.yaml with a real OpenAPI 3 parser and
// validator: a YAML slip (a flow mapping's comma splitting a description into
// an extra key), a bad reference or an example off its schema fails here.
func TestOpenAPIValid(t *testing.T) {
	t.Parallel()
	openapitest.Load(t, "openapi.yaml")
}

// TestOpenAPIMatchesRoutes checks that openapi.yaml documents exactly the
// routes that routes.go serves.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	spec := openapitest.Load(t, "openapi.yaml")
	h, err := NewHandler(Config{Pool: pgtest.New(t), InsecureNoAuth: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var served []string
	for _, r := range routeList(t, h) {
		served = append(served, r[0]+" "+r[1])
	}
	spec.MatchRoutes(t, served)
}
