package console

import (
	"context"
	"time"

	"github.com/effectd/effectd/operator"
)

// store keeps scs sessions through operator.Sessions, in effectd's own
// table; Find, Commit and Delete satisfy scs.Store, and scs calls the Ctx
// forms.
type store struct{ operator.Sessions }

func (s store) Find(token string) ([]byte, bool, error) {
	return s.FindCtx(context.Background(), token)
}
func (s store) Commit(token string, b []byte, expiry time.Time) error {
	return s.CommitCtx(context.Background(), token, b, expiry)
}
func (s store) Delete(token string) error { return s.DeleteCtx(context.Background(), token) }
