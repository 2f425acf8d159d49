// Package vip owns a TCP proxy that plays a virtual IP in tests: clients dial one fixed loopback
// address, and the test moves what is behind it from one server to another, as a failover script
// moves a floating IP or a DNS name to a promoted replica. Moving it closes every connection it
// carried, so clients reconnect and reach the new server. It knows no protocol and imports no
// slotwheel package; it is imported by tests only.
package vip

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// dialTimeout bounds the dial to the target; a client whose target cannot be reached is closed.
const dialTimeout = 2 * time.Second

// Proxy forwards each connection accepted on Addr to the current target. Its methods are safe for
// concurrent use.
type Proxy struct {
	ln net.Listener
	wg sync.WaitGroup

	mu     sync.Mutex
	target string
	// epoch counts the moves, so that a connection dialled to the old target while the proxy moved
	// is closed instead of kept.
	epoch  uint64
	conns  map[net.Conn]struct{} // both ends of every connection carried
	closed bool
}

// Start starts a proxy on a free loopback port that forwards to target ("host:port"). It is
// closed when the test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("vip: listen: %v", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's "127.0.0.1:port", the address clients dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is where new connections go.
func (p *Proxy) Target() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.target
}

// Point sends new connections to target and closes every connection carried so far, whichever
// server it reached: clients see their connection drop, as at a failover, and reconnect to target.
func (p *Proxy) Point(target string) {
	p.mu.Lock()
	p.target = target
	p.epoch++
	old := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range old {
		_ = c.Close()
	}
}

// Close stops accepting, closes every connection and waits for the proxy's goroutines to end. It is
// called when the test ends, and may be called before.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	_ = p.ln.Close()
	for c := range conns {
		_ = c.Close()
	}
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
			continue // a transient failure such as too many open files: keep serving
		}
		p.wg.Add(1)
		go p.serve(client)
	}
}

// serve dials the current target for client and copies both ways until either side closes.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	p.mu.Lock()
	target, epoch := p.target, p.epoch
	p.mu.Unlock()
	server, err := net.DialTimeout("tcp", target, dialTimeout)
	if err != nil {
		_ = client.Close() // what a client of a dead server sees, after its connect succeeded
		return
	}
	p.mu.Lock()
	if p.closed || p.epoch != epoch {
		p.mu.Unlock()
		_ = client.Close()
		_ = server.Close()
		return
	}
	p.conns[client], p.conns[server] = struct{}{}, struct{}{}
	p.mu.Unlock()

	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Either side ending ends the connection: a half-open one would only confuse a client.
		_ = dst.Close()
		_ = src.Close()
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-done
	<-done
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}
