package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// instance is one `effectd serve` child process, restartable.
type instance struct {
	n       int
	bin     string
	env     []string
	logPath string
	note    func(format string, args ...any) // the harness's event log

	mu       sync.Mutex // serialises faults on this instance
	cmd      *exec.Cmd
	exited   chan struct{} // closed when cmd has exited
	expected bool          // the harness caused the exit
	crashes  int           // exits nobody caused

	addr atomic.Value // string: the running process's admin API, "http://host:port"; read without mu

	withIngress bool         // serve the ingress too (provider events, callbacks)
	ingress     atomic.Value // string: the running process's ingress, "http://host:port"; read without mu
}

// start launches the process and waits until its admin API is up.
func (p *instance) start(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for try := 1; ; try++ {
		err := p.startOnce()
		if err == nil {
			return nil
		}
		// A start can fail while PostgreSQL restarts: try again until the deadline.
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("chaos: instance %d: %w", p.n, err)
		}
		p.note("instance %d failed to start (try %d): %v", p.n, try, err)
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (p *instance) startOnce() error {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	args := []string{"serve", "--addr", "127.0.0.1:0", "--insecure-no-auth", "--drain", "5s"}
	if p.withIngress {
		args = append(args, "--ingress-addr", "127.0.0.1:0")
	}
	p.ingress.Store("")
	cmd := exec.Command(p.bin, args...)
	cmd.Env = p.env
	cmd.Stderr = logf
	// The child dies with the harness, so nothing outlives a crashed run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		once := false
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), "effectd: ingress on "); ok {
				p.ingress.Store(addr)
			}
			if addr, ok := strings.CutPrefix(sc.Text(), "effectd: admin API on "); ok && !once {
				once = true
				p.addr.Store(addr)
				close(ready)
			}
		}
		io.Copy(io.Discard, out)
	}()
	exited := make(chan struct{})
	waitErr := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		logf.Close()
		waitErr <- err
		close(exited)
	}()
	select {
	case <-ready:
	case <-exited:
		return fmt.Errorf("serve exited before listening: %v (log %s)", <-waitErr, p.logPath)
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-exited
		return errors.New("serve did not listen within 30s")
	}
	p.cmd, p.exited, p.expected = cmd, exited, false
	go p.watch(cmd, exited, waitErr)
	return nil
}

// watch notes an exit that the harness did not cause: a crash of effectd.
func (p *instance) watch(cmd *exec.Cmd, exited chan struct{}, waitErr chan error) {
	<-exited
	err := <-waitErr
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == cmd && !p.expected {
		p.crashes++
		p.note("instance %d EXITED BY ITSELF: %v (see %s)", p.n, err, p.logPath)
	}
}

// signal sends sig; expectExit marks the coming exit as caused by the harness.
// The caller holds p.mu.
func (p *instance) signal(sig syscall.Signal, expectExit bool) {
	if p.cmd == nil {
		return
	}
	if expectExit {
		p.expected = true
	}
	p.cmd.Process.Signal(sig)
}

// kill sends SIGKILL and waits for the exit. The caller holds p.mu.
func (p *instance) kill() {
	if p.cmd == nil {
		return
	}
	p.signal(syscall.SIGKILL, true)
	<-p.exited
}

// alive reports whether the process runs. The caller holds p.mu.
func (p *instance) alive() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// ensure restarts the process when it is not running (crashed, or killed by
// a fault that was cut short). The caller holds p.mu.
func (p *instance) ensure(ctx context.Context) error {
	if p.alive() {
		p.cmd.Process.Signal(syscall.SIGCONT)
		return nil
	}
	return p.start(ctx)
}

// terminate asks the process to drain and exit (SIGTERM), and kills it when
// it does not within the deadline. It reports whether it exited cleanly.
func (p *instance) terminate(within time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.alive() {
		return nil
	}
	p.signal(syscall.SIGCONT, true)
	p.signal(syscall.SIGTERM, true)
	select {
	case <-p.exited:
		if !p.cmd.ProcessState.Success() {
			return fmt.Errorf("instance %d: serve exited %v after SIGTERM", p.n, p.cmd.ProcessState)
		}
		return nil
	case <-time.After(within):
		p.kill()
		return fmt.Errorf("instance %d: serve did not exit within %s of SIGTERM", p.n, within)
	}
}
