package api

import (
	"context"
	"testing"
)

func TestPrincipal(t *testing.T) {
	t.Parallel()
	payments := Principal{Name: "payments-oncall", Role: RoleOperator, Channels: []string{"refund", "payout-*"}}
	viewer := Principal{Name: "read", Role: RoleViewer}
	admin := Principal{Name: "root", Role: RoleAdmin, Channels: []string{"nothing"}}
	none := Principal{Name: "none", Role: RoleViewer, Channels: []string{}}
	see := []struct {
		p       Principal
		channel string
		want    bool
	}{
		{payments, "refund", true},
		{payments, "payout-eu", true},
		{payments, "payout", false},
		{payments, "refunds", false},
		{payments, "sms", false},
		{viewer, "sms", true},
		{admin, "sms", true},
		{none, "sms", false},
		{Principal{Name: "x"}, "sms", false}, // no role: nothing
	}
	for _, tt := range see {
		if got := tt.p.CanSee(tt.channel); got != tt.want {
			t.Errorf("%s.CanSee(%q) = %v, want %v", tt.p.Name, tt.channel, got, tt.want)
		}
	}
	can := []struct {
		r    Role
		a    Action
		want bool
	}{
		{RoleViewer, ActionRead, true}, {RoleViewer, ActionOperate, false}, {RoleViewer, ActionUnmask, false}, {RoleViewer, ActionPolicy, false},
		{RoleOperator, ActionRead, true}, {RoleOperator, ActionOperate, true}, {RoleOperator, ActionUnmask, true}, {RoleOperator, ActionPolicy, false},
		{RoleAdmin, ActionRead, true}, {RoleAdmin, ActionOperate, true}, {RoleAdmin, ActionUnmask, true}, {RoleAdmin, ActionPolicy, true},
		{Role("root"), ActionRead, false},
	}
	for _, tt := range can {
		if got := (Principal{Role: tt.r}).Can(tt.a); got != tt.want {
			t.Errorf("%s.Can(%s) = %v, want %v", tt.r, tt.a, got, tt.want)
		}
	}
	if _, ok := PrincipalFrom(context.Background()); ok {
		t.Error("PrincipalFrom of an empty context: ok")
	}
	if p, ok := PrincipalFrom(WithPrincipal(context.Background(), payments)); !ok || p.Name != payments.Name {
		t.Errorf("PrincipalFrom(WithPrincipal(payments)) = %+v, %v", p, ok)
	}
	if err := ValidateGlobs([]string{"refund", "payout-*"}); err != nil {
		t.Error(err)
	}
	if err := ValidateGlobs([]string{"payout-["}); err == nil {
		t.Error("ValidateGlobs(payout-[): no error")
	}
}

func TestAuthenticate(t *testing.T) {
	t.Parallel()
	ts := Tokens{
		NewToken(Principal{Name: "a", Role: RoleAdmin}, "secret-a"),
		NewToken(Principal{Name: "b", Role: RoleViewer, Channels: []string{"sms"}}, "secret-b"),
	}
	if p, ok := ts.Authenticate("secret-b"); !ok || p.Name != "b" || p.Role != RoleViewer || len(p.Channels) != 1 {
		t.Errorf("Authenticate(secret-b) = %+v, %v", p, ok)
	}
	for _, s := range []string{"", "secret", "secret-a ", "SECRET-A"} {
		if p, ok := ts.Authenticate(s); ok {
			t.Errorf("Authenticate(%q) = %+v, want no match", s, p)
		}
	}
	h, err := ParseSHA256("0000000000000000000000000000000000000000000000000000000000000000")
	if err != nil || h != [32]byte{} {
		t.Errorf("ParseSHA256(zeros) = %x, %v", h, err)
	}
	for _, s := range []string{"", "abc", "zz00000000000000000000000000000000000000000000000000000000000000"} {
		if _, err := ParseSHA256(s); err == nil {
			t.Errorf("ParseSHA256(%q): no error", s)
		}
	}
}
