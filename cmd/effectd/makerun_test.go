package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/effectd/effectd/internal/pgtest"
)

// TestMakeRunInterrupted: Ctrl-C on `make run` — SIGINT to make and to all it
// started, as a terminal sends it — stops effectd cleanly, and make reports no
// error: it ends by the signal, as an interrupted make does, or exits 0.
func TestMakeRunInterrupted(t *testing.T) {
	makePath, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make on PATH")
	}
	t.Parallel()
	cmd := exec.Command(makePath, "-C", "../..", "run",
		"DEV_FLAGS=--addr 127.0.0.1:0 --ingress-addr 127.0.0.1:0 --sandbox-addr 127.0.0.1:0")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+pgtest.URL(t))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a process group of its own, as a terminal's job
	var mu sync.Mutex
	var out bytes.Buffer
	cmd.Stdout = &lockedWriter{w: &out, mu: &mu}
	cmd.Stderr = cmd.Stdout
	output := func() string { mu.Lock(); defer mu.Unlock(); return out.String() }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if cmd.ProcessState == nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
		}
	}()
	poll(t, 3*time.Minute, "effectd serving under make run", func() bool {
		return strings.Contains(output(), "effectd: admin API on ")
	})
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	interrupted := errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGINT
	if err != nil && !interrupted {
		t.Errorf("make run after SIGINT: %v; want exit 0 or ended by the signal", err)
	}
	if got := output(); !strings.Contains(got, "effectd stopped") || strings.Contains(got, "Error") || strings.Contains(got, "make: ***") {
		t.Errorf("make run after SIGINT printed:\n%s\nwant a clean stop and no error", lastN(got, 3000))
	}
}

// TestDevSignalsExitZero: `effectd dev` stops cleanly and exits 0 on SIGINT
// and on SIGTERM.
func TestDevSignalsExitZero(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			p := startProc(t, []string{"DATABASE_URL=" + pgtest.URL(t), "EFFECTD_CONFIG=effectd.example.yaml"}, "dev",
				"--addr", "127.0.0.1:0", "--ingress-addr", "127.0.0.1:0", "--sandbox-addr", "127.0.0.1:0")
			p.waitAdmin(t)
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if err := p.cmd.Wait(); err != nil {
				t.Errorf("effectd dev after %v: %v; want exit 0", sig, err)
			}
		})
	}
}
