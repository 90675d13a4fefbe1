package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/effectd/effectd/api"
	"github.com/effectd/effectd/migrations"
)

// AccessSpec is the access section of the YAML.
type AccessSpec struct {
	Tokens    []TokenSpec         `yaml:"tokens"`
	Producers map[string][]string `yaml:"producers"` // PostgreSQL role → channel globs
}

// TokenSpec is one bearer token as written in the YAML: only its hash.
type TokenSpec struct {
	Name     string    `yaml:"name"`
	SHA256   string    `yaml:"sha256"`
	Role     string    `yaml:"role"`
	Channels *[]string `yaml:"channels"` // nil: every channel
	// Approve lists the channels (globs) on which the token may decide
	// others' approval requests (two-person approval); none when omitted.
	Approve []string `yaml:"approve"`
}

// Access is what the access section grants.
type Access struct {
	Tokens    []api.Token           // bearer tokens of the admin API, besides the environment's
	Producers []migrations.Producer // sorted by role; nil when the YAML has none
}

// LoadAccess reads the access section of the YAML at path.
func LoadAccess(path string) (Access, error) { return load(path, ParseAccess) }

// ParseAccess reads the access section of a YAML document and checks it
// against the document's channels.
func ParseAccess(b []byte) (Access, error) {
	var f File
	if _, err := decodeDocument(b, &f); err != nil {
		return Access{}, err
	}
	var out Access
	names, hashes := map[string]bool{}, map[[32]byte]string{}
	for i, t := range f.Access.Tokens {
		field := fmt.Sprintf("access.tokens[%d]", i)
		switch {
		case t.Name == "" || len(t.Name) > 64 || strings.ContainsFunc(t.Name, func(r rune) bool { return r < ' ' || r == 0x7f }):
			return out, fmt.Errorf("%s.name: is required: 1-64 printable characters (the audit's actor)", field)
		case names[t.Name]:
			return out, fmt.Errorf("%s.name: %q is listed twice", field, t.Name)
		case !api.Role(t.Role).Valid():
			return out, fmt.Errorf("%s.role: must be viewer, operator or admin, got %q", field, t.Role)
		case api.Role(t.Role) == api.RoleAdmin && t.Channels != nil:
			return out, fmt.Errorf("%s.channels: an admin sees every channel; drop channels, or give the token role operator", field)
		}
		names[t.Name] = true
		sum, err := api.ParseSHA256(t.SHA256)
		if err != nil {
			return out, fmt.Errorf("%s.sha256: %v (e.g. printf %%s \"$TOKEN\" | sha256sum)", field, err)
		}
		if other, ok := hashes[sum]; ok {
			return out, fmt.Errorf("%s.sha256: the same token as %q; each token needs its own secret", field, other)
		}
		hashes[sum] = t.Name
		p := api.Principal{Name: t.Name, Role: api.Role(t.Role)}
		if t.Channels != nil {
			p.Channels = append([]string{}, *t.Channels...)
			if err := checkGlobs(field+".channels", p.Channels, f.Channels); err != nil {
				return out, err
			}
		}
		if err := checkApprove(field, t, f.Channels); err != nil {
			return out, err
		}
		p.Approves = append([]string(nil), t.Approve...)
		out.Tokens = append(out.Tokens, api.Token{Principal: p, SHA256: sum})
	}
	roles := make([]string, 0, len(f.Access.Producers))
	for r := range f.Access.Producers {
		roles = append(roles, r)
	}
	slices.Sort(roles)
	for _, r := range roles {
		field := "access.producers." + r
		globs := f.Access.Producers[r]
		if r == "" || len(r) > 63 || strings.ContainsFunc(r, func(c rune) bool { return c < ' ' || c == 0x7f }) {
			return out, fmt.Errorf("%s: a PostgreSQL role name is 1-63 printable bytes", field)
		}
		if len(globs) == 0 {
			return out, fmt.Errorf("%s: list the channels the role may enqueue into", field)
		}
		if err := checkGlobs(field, globs, f.Channels); err != nil {
			return out, err
		}
		out.Producers = append(out.Producers, migrations.Producer{Role: r, Channels: globs})
	}
	return out, nil
}

// checkApprove refuses an approve list on a viewer (who may take no action)
// and a malformed or mistyped glob in it.
func checkApprove(field string, t TokenSpec, channels map[string]ChannelSpec) error {
	if len(t.Approve) == 0 {
		return nil
	}
	if !(api.Principal{Role: api.Role(t.Role)}).Can(api.ActionApprove) {
		return fmt.Errorf("%s.approve: a %s may not approve; give the token role operator or admin", field, t.Role)
	}
	return checkGlobs(field+".approve", t.Approve, channels)
}

// checkGlobs refuses a malformed glob, and a plain name that is no channel (a
// typo would otherwise quietly grant nothing).
func checkGlobs(field string, globs []string, channels map[string]ChannelSpec) error {
	for i, g := range globs {
		if err := api.ValidateGlobs([]string{g}); err != nil {
			return fmt.Errorf("%s[%d]: %q is not a valid pattern", field, i, g)
		}
		if _, ok := channels[g]; !ok && !strings.ContainsAny(g, `*?[\`) {
			return fmt.Errorf("%s[%d]: %q is no channel of this file", field, i, g)
		}
	}
	return nil
}
