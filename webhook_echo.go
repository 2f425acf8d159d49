package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/slotwheel/slotwheel/config"
	"github.com/slotwheel/slotwheel/engine/notify/webhook"
)

// webhookEchoFlags are the flags of `slotwheel webhook-echo`: a receiver for trying webhooks out,
// which verifies each request's Standard Webhooks signature and prints the event.
type webhookEchoFlags struct {
	addr   string
	secret string
}

func (f *webhookEchoFlags) register(fs *flag.FlagSet) func() error {
	fs.StringVar(&f.addr, "addr", "127.0.0.1:9090", "listen address")
	fs.StringVar(&f.secret, "secret", "", "the endpoint's secret (whsec_…), as POST /api/v1/admin/webhooks answered it")
	return func() error {
		if !strings.HasPrefix(f.secret, webhook.SecretPrefix) {
			return fmt.Errorf("--secret must be the endpoint's secret, starting with %s", webhook.SecretPrefix)
		}
		if _, _, err := net.SplitHostPort(f.addr); err != nil {
			return fmt.Errorf("--addr: %q is not a host:port address", f.addr)
		}
		return nil
	}
}

// run serves until ctx ends. A request whose signature verifies is answered 204 and printed as
// "<webhook-id> <type> <data>"; a repeated webhook-id (a redelivery) is marked as such; anything
// else is answered 401 and printed as refused.
func (f *webhookEchoFlags) run(ctx context.Context, _ *config.Config, out io.Writer, _ *slog.Logger) error {
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("--addr: listen on %s: %w", f.addr, err)
	}
	srv := &http.Server{Handler: newEchoHandler(f.secret, out), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(out, "webhook-echo: listening on http://%s/ — register that URL with POST /api/v1/admin/webhooks\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			return srv.Close() // a connection with no request yet holds Shutdown for five seconds
		}
		return nil
	case err := <-errc:
		return err
	}
}

func newEchoHandler(secret string, out io.Writer) http.Handler {
	var mu sync.Mutex
	seen := map[string]bool{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		id := r.Header.Get("webhook-id")
		mu.Lock()
		defer mu.Unlock()
		if err := webhook.Verify(secret, r.Header, body, time.Now(), webhook.DefaultTolerance); err != nil {
			fmt.Fprintf(out, "refused %s: %v\n", id, err)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var ev struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(body, &ev); err != nil {
			fmt.Fprintf(out, "refused %s: the body is not an event: %v\n", id, err)
			http.Error(w, "not an event", http.StatusBadRequest)
			return
		}
		var data bytes.Buffer
		if err := json.Compact(&data, ev.Data); err != nil {
			data.Write(ev.Data)
		}
		again := ""
		if seen[id] {
			again = " (delivered again)"
		}
		seen[id] = true
		fmt.Fprintf(out, "%s %s%s %s\n", id, ev.Type, again, data.String())
		w.WriteHeader(http.StatusNoContent)
	})
}
