package api

import (
	"context"
	"fmt"
	"path"
)

// Role is what a token may do on the channels it can see.
type Role string

// The roles, from least to most privileged.
const (
	RoleViewer   Role = "viewer"   // the GET routes; payload fields a channel redacts are masked
	RoleOperator Role = "operator" // also retry, cancel, resolve, reconcile, bulk actions, pause, resume
	RoleAdmin    Role = "admin"    // everything on every channel, policy changes
)

// Valid reports whether r is one of the three roles.
func (r Role) Valid() bool { return r == RoleViewer || r == RoleOperator || r == RoleAdmin }

// Action is something a role may or may not do on a channel it can see.
type Action string

// The actions the API checks.
const (
	ActionRead    Action = "read"    // read intents, channels and stats
	ActionOperate Action = "operate" // retry, cancel, resolve, reconcile, bulk actions, pause, resume
	ActionPolicy  Action = "policy"  // change a channel's policy
	ActionUnmask  Action = "unmask"  // read payload fields that the channel redacts
	// ActionApprove decides another person's approval request on a
	// two-person channel; a principal holds it only on the channels its
	// Approves lists (CanApprove), never by its role alone.
	ActionApprove Action = "approve"
)

// allowed lists, per role, the actions it may take.
var allowed = map[Role]map[Action]bool{
	RoleViewer:   {ActionRead: true},
	RoleOperator: {ActionRead: true, ActionOperate: true, ActionUnmask: true, ActionApprove: true},
	RoleAdmin:    {ActionRead: true, ActionOperate: true, ActionUnmask: true, ActionPolicy: true, ActionApprove: true},
}

// Principal is who made a request: the token's name (the audit's actor), its
// role, and the channels it may see.
type Principal struct {
	Name     string
	Role     Role
	Channels []string // shell-style globs (path.Match); nil means every channel
	// Approves lists the channels (globs) on which the principal may decide
	// approval requests of others; nil or empty: none.
	Approves []string
}

// CanApprove reports whether the principal may decide others' approval
// requests on channel: its role allows ActionApprove, it sees the channel,
// and its Approves names it.
func (p Principal) CanApprove(channel string) bool {
	if !p.Can(ActionApprove) || !p.CanSee(channel) {
		return false
	}
	for _, g := range p.Approves {
		if ok, _ := path.Match(g, channel); ok {
			return true
		}
	}
	return false
}

// CanSee reports whether channel is in the principal's scope. An admin sees
// every channel.
func (p Principal) CanSee(channel string) bool {
	if p.Role == RoleAdmin || p.Channels == nil {
		return p.Role.Valid()
	}
	for _, g := range p.Channels {
		if ok, _ := path.Match(g, channel); ok {
			return true
		}
	}
	return false
}

// Can reports whether the principal's role allows a.
func (p Principal) Can(a Action) bool { return allowed[p.Role][a] }

// scoped reports whether some channels are out of the principal's sight.
func (p Principal) scoped() bool { return p.Role != RoleAdmin && p.Channels != nil }

// sees is the principal's scope as the operator service's methods take it: nil
// when it sees every channel, else CanSee.
func (p Principal) sees() func(channel string) bool {
	if !p.scoped() {
		return nil
	}
	return p.CanSee
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p, as the auth middleware sets it.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	if slot, _ := ctx.Value(principalKey{}).(*Principal); slot != nil {
		*slot = p // so that logRequests, outside, sees who it was
		return ctx
	}
	return context.WithValue(ctx, principalKey{}, &p)
}

// PrincipalFrom returns who made the request whose context is ctx; false
// when no one was authenticated.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	if p, _ := ctx.Value(principalKey{}).(*Principal); p != nil && p.Role != "" {
		return *p, true
	}
	return Principal{}, false
}

// ValidateGlobs checks that each channel glob is a well-formed pattern.
func ValidateGlobs(globs []string) error {
	for i, g := range globs {
		if g == "" {
			return fmt.Errorf("channels[%d]: empty pattern", i)
		}
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("channels[%d]: %q: %v", i, g, err)
		}
	}
	return nil
}
