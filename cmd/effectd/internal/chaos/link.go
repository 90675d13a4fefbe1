package chaos

import (
	"io"
	"net"
	"sync"
	"time"
)

// link is the network between the primary and its standby: a TCP proxy that
// the standby's replication connection goes through, holding what the
// primary sends for lag before passing it on. cut is a partition: what the
// link holds is dropped and every connection closed. On loopback the
// replication lag is a few microseconds, and a failover there loses next to
// nothing; lag stands for a real link's (and a busy standby's).
type link struct {
	ln     net.Listener
	target string
	lag    time.Duration

	mu    sync.Mutex
	conns []net.Conn
	cut   chan struct{} // closed by cut
}

// startLink listens on a loopback port and carries connections to target.
func startLink(target string, lag time.Duration) (*link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &link{ln: ln, target: target, lag: lag, cut: make(chan struct{})}
	go l.accept()
	return l, nil
}

// port is the port the standby connects to.
func (l *link) port() int { return l.ln.Addr().(*net.TCPAddr).Port }

func (l *link) accept() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", l.target)
		if err != nil {
			c.Close()
			continue
		}
		l.mu.Lock()
		select {
		case <-l.cut:
			l.mu.Unlock()
			c.Close()
			up.Close()
			return
		default:
		}
		l.conns = append(l.conns, c, up)
		l.mu.Unlock()
		go func() { io.Copy(up, c); up.Close() }() // the standby's side: acknowledgements, at once
		go l.delayed(c, up)
	}
}

// chunk is what one read from the primary returned, and when.
type chunk struct {
	b  []byte
	at time.Time
}

// delayed copies from the primary (up) to the standby (c), each chunk lag
// after it was read, until either side closes or the link is cut.
func (l *link) delayed(c, up net.Conn) {
	q := make(chan chunk, 4096)
	go func() {
		defer close(q)
		for {
			b := make([]byte, 32<<10)
			n, err := up.Read(b)
			if n > 0 {
				q <- chunk{b[:n], time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	defer c.Close()
	for ch := range q {
		t := time.NewTimer(time.Until(ch.at.Add(l.lag)))
		select {
		case <-l.cut:
			t.Stop()
			return
		case <-t.C:
		}
		if _, err := c.Write(ch.b); err != nil {
			return
		}
	}
}

// partition drops what the link holds and closes it for good.
func (l *link) partition() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.cut:
		return
	default:
	}
	for _, c := range l.conns {
		c.Close()
	}
	close(l.cut)
	l.ln.Close()
}
