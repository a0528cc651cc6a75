package measure

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/llmproxy"
	"github.com/carapace-dev/carapace/ipc/relay"
)

// LLMStreamSize is about the size of the streamed reply (n) is taken on.
const LLMStreamSize = 2 << 20

// LLM is what MeasureLLM found in one repetition: a model API call straight
// to a fake upstream on loopback, and the same call through the agent's
// path, the ipc-relay (TCP on 127.0.0.1) and the proxy (its Unix socket,
// then TLS to the upstream).
type LLM struct {
	Direct, Relayed             Latency // (m) a small POST /v1/messages, JSON reply
	StreamDirect, StreamRelayed Latency // (n) a streamed reply of StreamBytes, request to last byte
	StreamBytes                 int
}

// StreamRatio is the relayed stream throughput over the direct one, from
// the medians of the stream times.
func (l LLM) StreamRatio() float64 {
	if l.StreamRelayed.Median <= 0 {
		return 0
	}
	return float64(l.StreamDirect.Median) / float64(l.StreamRelayed.Median)
}

// MBPerSec is the throughput of a stream of n bytes taking d.
func MBPerSec(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds() / 1e6
}

// LLMStreams is how many streamed calls each side gets per repetition for n
// small ones.
func LLMStreams(n int) int { return max(n/10, 5) }

// nopAudit is an Auditor that keeps nothing.
type nopAudit struct{}

var _ llmproxy.Auditor = nopAudit{}

// Write discards e.
func (nopAudit) Write(e *audit.Entry) error { return nil }

const (
	llmBody    = `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"hello"}]}`
	llmReply   = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":2}}`
	llmSSEHead = "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":10,"output_tokens":1}}}` + "\n\n" +
		"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n"
	llmSSEDelta = "event: content_block_delta\n" +
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lorem ipsum dolor sit amet, lorem ipsum dolor sit amet, lorem ipsum dolor sit amet"}}` + "\n\n"
	llmSSETail = "event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n" +
		"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":50000}}` + "\n\n" +
		"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"
)

// llmStream is a streamed Messages reply of about LLMStreamSize bytes.
func llmStream() string {
	var b strings.Builder
	b.WriteString(llmSSEHead)
	for b.Len() < LLMStreamSize {
		b.WriteString(llmSSEDelta)
	}
	b.WriteString(llmSSETail)
	return b.String()
}

// MeasureLLM starts a fake model API (httptest TLS server on loopback), a
// proxy (llmproxy.Serve on a Unix socket in a temporary folder) and an ipc
// relay (relay.Serve on 127.0.0.1) in process, then, reps times, times n
// small calls and LLMStreams(n) streamed ones on each side, interleaved by
// kind, each side with its own keep-alive client.
func MeasureLLM(n, reps int) (_ []LLM, err error) {
	stream := llmStream()
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		if strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, stream)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, llmReply)
	}))
	defer api.Close()
	pool := x509.NewCertPool()
	pool.AddCert(api.Certificate())
	up, err := url.Parse(api.URL)
	if err != nil {
		return nil, err
	}
	upTransport := llmproxy.NewTransport(pool)
	defer upTransport.CloseIdleConnections()
	proxy, err := llmproxy.New(llmproxy.Options{
		Upstream:  up,
		Transport: upTransport,
		Credential: func(context.Context) (llmproxy.Credential, error) {
			return llmproxy.Credential{Kind: llmproxy.KindAPIKey, Secret: "k"}, nil
		},
		Session: "bench", Group: "bench",
		RequestsPerMinute: 1 << 30, Burst: 1 << 30,
		Audit:  nopAudit{},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, err
	}

	dir, err := os.MkdirTemp("", "cpllm")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "llm.sock")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var proxyErr, relayErr error
	defer func() {
		cancel()
		wg.Wait()
		err = errors.Join(err, proxyErr, relayErr)
	}()
	wg.Add(1)
	go func() { defer wg.Done(); proxyErr = llmproxy.Serve(ctx, sock, proxy) }()
	ln, err := relay.Listen("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		relayErr = relay.Serve(ctx, ln, relay.Options{Socket: sock, Logger: slog.New(slog.DiscardHandler)})
	}()
	relayURL := "http://" + ln.Addr().String()

	directTransport := llmproxy.NewTransport(pool)
	defer directTransport.CloseIdleConnections()
	relayTransport := http.DefaultTransport.(*http.Transport).Clone()
	relayTransport.DisableCompression = true
	defer relayTransport.CloseIdleConnections()
	direct := &http.Client{Transport: directTransport}
	relayed := &http.Client{Transport: relayTransport}

	call := func(c *http.Client, base, body string, want int) func() error {
		return func() error {
			r, err := http.NewRequest(http.MethodPost, base+"/v1/messages", strings.NewReader(body))
			if err != nil {
				return err
			}
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Anthropic-Version", "2023-06-01")
			r.Header.Set("X-Api-Key", "k")
			resp, err := c.Do(r)
			if err != nil {
				return err
			}
			got, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err == nil && (resp.StatusCode != http.StatusOK || (want > 0 && got != int64(want))) {
				err = fmt.Errorf("%s: status %d, %d bytes (want %d)", base, resp.StatusCode, got, want)
			}
			return err
		}
	}
	streamBody := strings.Replace(llmBody, `"max_tokens"`, `"stream":true,"max_tokens"`, 1)
	// The proxy's Serve runs in its own goroutine: the relay's first dial may
	// come before it listens, so wait for one call to get through.
	if err := waitFor(call(relayed, relayURL, llmBody, len(llmReply))); err != nil {
		return nil, fmt.Errorf("through the relay: %w", err)
	}
	streams := LLMStreams(n)
	out := make([]LLM, reps)
	for k := range out {
		l := &out[k]
		l.StreamBytes = len(stream)
		for _, op := range []struct {
			into     *Latency
			n        int
			run      func() error
			warmFrac int
		}{
			{&l.Direct, n, call(direct, api.URL, llmBody, len(llmReply)), 10},
			{&l.Relayed, n, call(relayed, relayURL, llmBody, len(llmReply)), 10},
			{&l.StreamDirect, streams, call(direct, api.URL, streamBody, len(stream)), 5},
			{&l.StreamRelayed, streams, call(relayed, relayURL, streamBody, len(stream)), 5},
		} {
			if *op.into, err = Sample(op.n, op.n/op.warmFrac+1, op.run); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// waitFor retries op for up to about a second.
func waitFor(op func() error) error {
	var err error
	for range 100 {
		if err = op(); err == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return err
}
