package rushbench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slotwheel/slotwheel/internal/bench/releasebench"
)

// newHTTPClient is the clients' way in: conns keep-alive HTTP/1.1 connections to the design's
// server, opened by the warm-up before the gate and kept, as a load balancer or API gateway in
// front of a service keeps its upstream connections (fire queues the clients' requests for them).
// One fresh connection per client at the gate would measure the kernel rather than the design:
// 20,000 dials at once overflow a small machine's listen backlog, and the dropped SYNs are sent
// again a second (or three) later.
func newHTTPClient(conns int, timeout time.Duration) *http.Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxConnsPerHost:     conns,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     5 * time.Minute,
		DisableCompression:  true,
	}
	return &http.Client{Transport: tr, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// call is one client's hold request.
type call struct {
	slot       int
	body       []byte
	token, key string
}

// answer is what one client got.
type answer struct {
	slot   int
	at     time.Duration // from the gate until the answer was read in full
	status int           // 0: no answer at all; code says why
	code   string        // error.code of a non-2xx answer, or the transport's failure
}

func (a answer) answered() bool { return a.status != 0 }
func (a answer) sale() bool     { return a.status == http.StatusCreated }
func (a answer) refusal() bool  { return a.status == http.StatusConflict && a.code == "slot_full" }

// kind names an error for the tally: "503 backend_unavailable", "no answer: connection reset".
func (a answer) kind() string {
	if !a.answered() {
		return "no answer: " + a.code
	}
	if a.code == "" {
		return fmt.Sprint(a.status)
	}
	return fmt.Sprintf("%d %s", a.status, a.code)
}

// fire sends every call at once: the clients' requests, built before the gate, queue in their
// order for the conns connections, each of which carries one at a time (HTTP/1.1), as behind a
// load balancer; a client's latency runs from the gate, so its time in the queue counts. (A
// goroutine per client, each waiting for a connection, would cost this process a second of
// scheduling 20,000 goroutines before the first request left it.) It returns the answers sorted by
// arrival.
func fire(ctx context.Context, hc *http.Client, base string, calls []call, conns int, p *releasebench.Progress) []answer {
	answers := make([]answer, len(calls))
	reqs := make([]*http.Request, len(calls))
	for i, c := range calls {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/holds", bytes.NewReader(c.body))
		if err != nil {
			panic(err) // a fixed method and a URL that served the warm-up
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+c.token)
		req.Header.Set("Idempotency-Key", c.key)
		reqs[i] = req
	}
	gate := make(chan struct{})
	var opened time.Time
	var next, n atomic.Int64
	var wg sync.WaitGroup
	for range min(conns, len(reqs)) {
		wg.Go(func() {
			<-gate
			for i := int(next.Add(1) - 1); i < len(reqs); i = int(next.Add(1) - 1) {
				answers[i] = send(hc, reqs[i], opened)
				answers[i].slot = calls[i].slot
				n.Add(1)
			}
		})
	}
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				p.Set(int(n.Load()))
			}
		}
	}()
	opened = time.Now()
	close(gate)
	wg.Wait()
	close(stop)
	slices.SortFunc(answers, func(a, b answer) int { return cmp.Compare(a.at, b.at) })
	return answers
}

func send(hc *http.Client, req *http.Request, gate time.Time) answer {
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, so that failures alike tally together
		}
		return answer{at: time.Since(gate), code: err.Error()}
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode}
	if a.status != http.StatusCreated {
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e)
		a.code = e.Error.Code
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	a.at = time.Since(gate)
	return a
}

// countSales adds the sales of answers (sorted by arrival) to sold, units taken per slot so far,
// and returns how many of them went beyond their slot's capacity.
func countSales(answers []answer, sold []int, capacity int) (oversold int) {
	for _, a := range answers {
		if a.sale() {
			sold[a.slot]++
			if sold[a.slot] > capacity {
				oversold++
			}
		}
	}
	return oversold
}
