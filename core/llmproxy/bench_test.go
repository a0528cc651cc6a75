package llmproxy

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/audit"
)

// discardAudit is an Auditor that keeps nothing.
type discardAudit struct{}

func (discardAudit) Write(*audit.Entry) error { return nil }

// benchStream returns a streamed Messages reply of about size bytes.
func benchStream(size int) string {
	var b strings.Builder
	b.WriteString(sseFirst)
	delta := "event: content_block_delta\n" +
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + strings.Repeat("lorem ipsum ", 8) + `"}}` + "\n\n"
	for b.Len() < size {
		b.WriteString(delta)
	}
	b.WriteString(sseRest)
	return b.String()
}

// BenchmarkProxy compares a call through the proxy (client → Unix socket →
// proxy → TLS → fake API) with the same call straight to the fake API
// (client → TLS → fake API): the difference of their ns/op is the latency
// the proxy adds, the ratio of their MB/s its effect on stream throughput.
func BenchmarkProxy(b *testing.B) {
	stream := benchStream(2 << 20)
	handle := func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(string(seenBody(r)), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, stream)
			return
		}
		replyJSON(w, r)
	}
	h := newHarness(b, handle, func(o *Options) {
		o.RequestsPerMinute, o.Burst = 1<<30, 1<<30
		o.Audit = discardAudit{}
		o.Logger = nil
	})
	direct := &http.Client{Transport: h.api.transport()}
	b.Cleanup(direct.CloseIdleConnections)
	apiURL := h.api.srv.URL

	small := messagesBody
	streamed := strings.Replace(messagesBody, `"max_tokens"`, `"stream":true,"max_tokens"`, 1)
	run := func(b *testing.B, c *http.Client, base, body string, want int) {
		b.Helper()
		if want > 0 {
			b.SetBytes(int64(want))
		}
		b.ReportAllocs()
		for b.Loop() {
			r := claudeRequest(b, "POST", "/v1/messages?beta=true", body)
			r.URL.Host = strings.TrimPrefix(strings.TrimPrefix(base, "https://"), "http://")
			if strings.HasPrefix(base, "https://") {
				r.URL.Scheme = "https"
				r.Header.Set("X-Api-Key", apiSecret)
			}
			resp, err := c.Do(r)
			if err != nil {
				b.Fatal(err)
			}
			n, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || (want > 0 && n != int64(want)) {
				b.Fatalf("status %d, %d bytes, %v", resp.StatusCode, n, err)
			}
		}
	}
	b.Run("messages/direct", func(b *testing.B) { run(b, direct, apiURL, small, 0) })
	b.Run("messages/proxy", func(b *testing.B) { run(b, h.client, "http://127.0.0.1", small, 0) })
	b.Run(fmt.Sprintf("sse%dKiB/direct", len(stream)>>10), func(b *testing.B) { run(b, direct, apiURL, streamed, len(stream)) })
	b.Run(fmt.Sprintf("sse%dKiB/proxy", len(stream)>>10), func(b *testing.B) { run(b, h.client, "http://127.0.0.1", streamed, len(stream)) })
}

// seenBody returns r's body.
func seenBody(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	return b
}

// conversation returns a request body of about size bytes shaped like one
// of Claude Code's late in a session: client tools, then turns of text, a
// tool call with its input, and a tool result with text and an inline
// image.
func conversation(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"claude-sonnet-4-5","max_tokens":32000,"stream":true,"system":[{"type":"text","text":"` + strings.Repeat("You are an agent. ", 200) + `"}],"tools":`)
	b.WriteString(clientTools)
	b.WriteString(`,"messages":[`)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"role":"user","content":"%s"},`, strings.Repeat("please look at this file ", 40))
		fmt.Fprintf(&b, `{"role":"assistant","content":[{"type":"text","text":"reading it"},{"type":"tool_use","id":"toolu_%d","name":"Read","input":{"file_path":"/workspace/a.go","limit":2000}}]},`, i)
		fmt.Fprintf(&b, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_%d","content":[{"type":"text","text":"%s"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"%s"}}]}]}`,
			i, strings.Repeat(`func main() {\n\tfmt.Println(\"hello\")\n}\n`, 100), strings.Repeat("iVBORw0KGgo", 400))
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// BenchmarkCheckBody measures the body check on a small request and on a
// 4 MiB conversation: its ns/op is what the check adds to a request.
func BenchmarkCheckBody(b *testing.B) {
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"small", []byte(messagesBody)},
		{"conversation4MiB", conversation(4 << 20)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if be := checkBody(tc.body); be != nil {
				b.Fatalf("the body is refused: %s", be.msg)
			}
			b.SetBytes(int64(len(tc.body)))
			b.ReportAllocs()
			for b.Loop() {
				checkBody(tc.body)
			}
		})
	}
}
