package api

import "context"

type inProcessKey struct{}

// InProcess returns ctx for a request that code in this process hands
// straight to the API's handler (the console, acting for a person it has
// authenticated): the handler takes p as the caller instead of reading a
// bearer token. A request from the network cannot carry it.
func InProcess(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, inProcessKey{}, p)
}

// inProcess returns the principal InProcess put on ctx.
func inProcess(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(inProcessKey{}).(Principal)
	return p, ok && p.Role.Valid()
}
