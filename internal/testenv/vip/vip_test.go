package vip

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/internal/testenv/redistest"
)

// greeter is a TCP server that says its name on each connection, then echoes lines.
func greeter(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				if _, err := io.WriteString(c, name+"\n"); err != nil {
					return
				}
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// dial connects through the proxy and returns the name of the server reached.
func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	r := bufio.NewReader(c)
	name, err := r.ReadString('\n')
	require.NoError(t, err)
	return c, r, name[:len(name)-1]
}

func TestPointMovesNewConnectionsAndClosesOldOnes(t *testing.T) {
	t.Parallel()
	a, b := greeter(t, "a"), greeter(t, "b")
	p := Start(t, a)
	require.Equal(t, a, p.Target())

	old, oldR, name := dial(t, p.Addr())
	require.Equal(t, "a", name)
	_, err := io.WriteString(old, "ping\n")
	require.NoError(t, err)
	line, err := oldR.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ping\n", line, "bytes flow both ways")

	p.Point(b)
	require.Equal(t, b, p.Target())
	_, err = oldR.ReadString('\n')
	require.Error(t, err, "the connection to the old target is closed")

	_, _, name = dial(t, p.Addr())
	require.Equal(t, "b", name, "a new connection reaches the new target")
}

// A target that refuses is seen as a connection closed at once, as a client of a dead server
// behind a virtual IP sees it.
func TestDeadTargetClosesTheClient(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())

	p := Start(t, dead)
	c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	_, err = c.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF)
}

func TestCloseStopsEverything(t *testing.T) {
	t.Parallel()
	p := Start(t, greeter(t, "a"))
	_, r, _ := dial(t, p.Addr())
	p.Close()
	_, err := r.ReadString('\n')
	require.Error(t, err, "carried connections are closed")
	// Nothing forwards from the address any more. A dial may still connect: the port is free again,
	// and another test's listener (tests run in parallel) can take it at once — so what is asserted
	// is that no greeting of the old target comes through it.
	if c, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		require.NoError(t, c.SetDeadline(time.Now().Add(500*time.Millisecond)))
		line, _ := bufio.NewReader(c).ReadString('\n')
		_ = c.Close()
		require.NotEqual(t, "a\n", line, "the closed proxy still forwards")
	}
	p.Close() // idempotent: the test's cleanup calls it again
}

// A Redis client on the virtual IP follows it to another server: its pooled connection drops, and
// the next command reconnects, to the new server.
func TestRedisClientFollowsThePoint(t *testing.T) {
	t.Parallel()
	first, second := redistest.StartServer(t), redistest.StartServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := Start(t, first.Addr())
	c := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer func() { _ = c.Close() }()
	require.NoError(t, c.Set(ctx, "where", "first", 0).Err())

	p.Point(second.Addr())
	require.Eventually(t, func() bool { return errors.Is(c.Get(ctx, "where").Err(), redis.Nil) }, 5*time.Second, 20*time.Millisecond,
		"the client reaches the second server, which has no key")
	require.NoError(t, c.Set(ctx, "where", "second", 0).Err())
	direct := redis.NewClient(&redis.Options{Addr: second.Addr()})
	defer func() { _ = direct.Close() }()
	require.Equal(t, "second", direct.Get(ctx, "where").Val())
}
