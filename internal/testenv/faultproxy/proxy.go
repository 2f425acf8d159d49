// Package faultproxy owns a TCP proxy that a test puts between a client and a server to make the
// network fail on cue: it can drop a connection right after the server received a COMMIT, so the
// transaction commits but the client never learns it did (SeverAfterCommit); accept connections and
// never answer (Blackhole); cut every connection (CutAll); or refuse new ones (Refuse). It is
// imported by tests only.
package faultproxy

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	dialTimeout = 5 * time.Second
	// answerWait bounds how long a severed connection waits for the server's answer to the COMMIT
	// before it is dropped anyway: a server that stalls must not stall the test.
	answerWait = 10 * time.Second
	bufSize    = 32 << 10
)

// Proxy forwards TCP connections from Addr to a target. Its methods are safe for concurrent use.
type Proxy struct {
	t      testing.TB
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu        sync.Mutex
	conns     map[*conn]struct{}
	closed    bool
	refuse    bool
	blackhole bool
	flowing   chan struct{} // closed while traffic flows; an open one while blackholed
	severLeft int           // COMMITs still to sever; negative: every one
	severed   int
}

// New starts a proxy on a free loopback port that forwards to target ("host:port"). It is closed
// when the test ends.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err, "faultproxy: listen")
	flowing := make(chan struct{})
	close(flowing)
	p := &Proxy{t: t, target: target, ln: ln, conns: map[*conn]struct{}{}, flowing: flowing}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's "127.0.0.1:port", for the client to dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SeverAfterCommit makes the proxy cut the connection of each of the next n COMMITs (n < 0: every
// one from now on, 0: none) once the server has received it: the COMMIT is forwarded, the proxy
// waits for the server's answer (so the commit has been carried out when the client sees the
// error), and closes both sides without passing any byte of that answer on. The client sees a
// broken connection ("invalid connection") and cannot tell whether the transaction committed.
// Connections whose client asked for TLS or compression are passed through unread.
func (p *Proxy) SeverAfterCommit(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.severLeft = n
}

// Severed is the number of connections cut after a COMMIT so far.
func (p *Proxy) Severed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.severed
}

// Blackhole on makes the proxy a server that accepts and never answers: new connections are
// accepted but not forwarded, and existing ones stop forwarding in both directions. Off lets every
// held connection go on where it stopped.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && !p.blackhole:
		p.flowing = make(chan struct{})
	case !on && p.blackhole:
		close(p.flowing)
	}
	p.blackhole = on
}

// Refuse on makes the proxy close each new connection as soon as it is accepted.
func (p *Proxy) Refuse(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = on
}

// CutAll closes every current connection, both sides, now.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	conns := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// Conns is the number of connections open through the proxy, held ones included.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close stops the proxy and closes every connection; it returns when all of its goroutines are
// done. It is called when the test ends, and may be called before.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	_ = p.ln.Close()
	p.CutAll()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors or the like: back off rather than spin, and keep serving.
			p.t.Logf("faultproxy: accept: %v", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		c := newConn(p, client)
		if !p.add(c) {
			_ = client.Close()
			continue
		}
		p.wg.Add(1)
		go c.run()
	}
}

// add registers c, unless new connections are refused.
func (p *Proxy) add(c *conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.refuse {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) remove(c *conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

// waitFlowing blocks while the proxy is blackholed; false means c was closed meanwhile.
func (p *Proxy) waitFlowing(c *conn) bool {
	p.mu.Lock()
	flowing := p.flowing
	p.mu.Unlock()
	select {
	case <-flowing:
		return true
	case <-c.ctx.Done():
		return false
	}
}

// takeSever reports whether the COMMIT just seen is to be severed, and counts it against n.
func (p *Proxy) takeSever() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.severLeft == 0 {
		return false
	}
	if p.severLeft > 0 {
		p.severLeft--
	}
	return true
}

func (p *Proxy) countSevered() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.severed++
}

// conn is one proxied connection.
type conn struct {
	p      *Proxy
	client net.Conn
	ctx    context.Context // done once the connection is closed
	cancel context.CancelFunc

	mu     sync.Mutex
	server net.Conn // nil until dialled

	closeOnce sync.Once
	// severing is set before a COMMIT to be severed is forwarded; whatever the server sends after
	// that is its answer, which must not reach the client.
	severing atomic.Bool
	answered chan struct{} // closed when the answer to the severed COMMIT arrived
}

func newConn(p *Proxy, client net.Conn) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	return &conn{p: p, client: client, ctx: ctx, cancel: cancel, answered: make(chan struct{})}
}

func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.cancel()
		_ = c.client.Close()
		c.mu.Lock()
		if c.server != nil {
			_ = c.server.Close()
		}
		c.mu.Unlock()
		c.p.remove(c)
	})
}

// run dials the target, once the proxy is not blackholed, and pumps the client's bytes to it; a
// second goroutine pumps the other way.
func (c *conn) run() {
	defer c.p.wg.Done()
	if !c.p.waitFlowing(c) {
		return
	}
	d := net.Dialer{Timeout: dialTimeout}
	server, err := d.DialContext(c.ctx, "tcp", c.p.target)
	if err != nil {
		c.close()
		return
	}
	c.mu.Lock()
	if c.ctx.Err() != nil { // closed while dialling
		c.mu.Unlock()
		_ = server.Close()
		return
	}
	c.server = server
	c.mu.Unlock()

	c.p.wg.Add(1)
	go c.serverToClient()
	c.clientToServer()
}

func (c *conn) clientToServer() {
	defer c.close()
	var scan commitScanner
	buf := make([]byte, bufSize)
	for {
		n, err := c.client.Read(buf)
		if n > 0 {
			if !c.p.waitFlowing(c) {
				return
			}
			data := buf[:n]
			for len(data) > 0 {
				end, commit := scan.feed(data)
				if commit && c.p.takeSever() {
					c.sever(data[:end])
					return
				}
				if _, err := c.server.Write(data[:end]); err != nil {
					return
				}
				data = data[end:]
			}
		}
		if err != nil {
			return
		}
	}
}

// sever forwards the rest of a COMMIT packet, waits for the server's answer and closes both sides.
// Bytes the client sent after the COMMIT are dropped.
func (c *conn) sever(last []byte) {
	c.severing.Store(true)
	if _, err := c.server.Write(last); err == nil {
		timer := time.NewTimer(answerWait)
		defer timer.Stop()
		select {
		case <-c.answered:
		case <-c.ctx.Done(): // CutAll or Close
		case <-timer.C:
		}
	}
	// Counted before the client can see the cut, so a test that got the error reads the new count.
	c.p.countSevered()
	c.close()
}

func (c *conn) serverToClient() {
	defer c.p.wg.Done()
	buf := make([]byte, bufSize)
	for {
		n, err := c.server.Read(buf)
		if c.severing.Load() {
			// The answer to the severed COMMIT (or the server hanging up): sever closes the
			// connection once it has counted the cut.
			close(c.answered)
			return
		}
		if n > 0 {
			if !c.p.waitFlowing(c) {
				return
			}
			if _, err := c.client.Write(buf[:n]); err != nil {
				c.close()
				return
			}
		}
		if err != nil {
			c.close()
			return
		}
	}
}
