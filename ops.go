package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// startOps puts what operators read of an instance in place: the snapshot gauges of the engine
// (overdue bookings) and of the queue (Asynq's task counts) on the registry /metrics serves, and,
// with SLOTWHEEL_PPROF_ADDR set, net/http/pprof on its own listener. stop ends the listener.
func startOps(w *wiring, log *slog.Logger) (stop func(), err error) {
	for _, c := range []prometheus.Collector{w.eng.StatsCollector(), w.jobs.StatsCollector()} {
		if err := prometheus.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	if w.cfg.PprofAddr == "" {
		return func() {}, nil
	}
	return servePprof(w.cfg.PprofAddr, log)
}

// servePprof serves the profiles of net/http/pprof under /debug/pprof/ on addr. They get a listener
// of their own, never the API's: they show the program's internals, so the address is one an
// operator chooses to expose (typically loopback). No write timeout: a CPU profile or a trace
// streams for as long as its ?seconds= asks.
func servePprof(addr string, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("SLOTWHEEL_PPROF_ADDR: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // also serves the named profiles (heap, goroutine, ...)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("pprof listener stopped", "addr", addr, "err", err)
		}
	}()
	log.Info("pprof listening", "addr", ln.Addr().String())
	return func() {
		// A profile in progress is cut short: shutting down must not wait out its seconds.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
	}, nil
}
