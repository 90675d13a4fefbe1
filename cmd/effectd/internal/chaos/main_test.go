package chaos

import (
	"testing"

	"github.com/effectd/effectd/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
